"""The zstd dictionaries of small objects: frozen, never edited (add a new version).

A checkpoint or writes object of a few KB compresses poorly alone: much of it is the
same boilerplate every time (the serialized field names and class paths of LangGraph
checkpoints and langchain messages, the envelope's own keys). A raw-content
dictionary of that boilerplate, known to reader and writer, lets zstd refer to it
instead: measured on the benchmark chat at 300 turns, checkpoint objects shrink by
12% and writes objects by 17% beyond plain zstd. Objects name the dictionary they
were compressed with (``codec``), so this one must stay byte for byte as it is.
"""

from __future__ import annotations

import base64

V1 = base64.b64decode(
    "hqF2BKJ0c9kgMjAyNi0wMS0wMVQwMDowMDowMC4wMDAwMDArMDA6MDCiaWTZJDAwMDAwMDAwLTAwMDAtMDAwMC0w"
    "MDAwLTAwMDAwMDAwMDAwMLBjaGFubmVsX3ZlcnNpb25zhKlfX3N0YXJ0X1+5MDAwMDAwMDAwMDAxLjAwMDAwMDAw"
    "MDAwMKhtZXNzYWdlc7kwMDAwMDAwMDAwMDEuMDAwMDAwMDAwMDAwr2JyYW5jaDp0bzphZ2VudLkwMDAwMDAwMDAw"
    "MDEuMDAwMDAwMDAwMDAwr2JyYW5jaDp0bzp0b29sc7kwMDAwMDAwMDAwMDEuMDAwMDAwMDAwMDAwrXZlcnNpb25z"
    "X3NlZW6EqV9faW5wdXRfX4CpX19zdGFydF9fgalfX3N0YXJ0X1+5MDAwMDAwMDAwMDAxLjAwMDAwMDAwMDAwMKVh"
    "Z2VudIGvYnJhbmNoOnRvOmFnZW50uTAwMDAwMDAwMDAwMS4wMDAwMDAwMDAwMDCldG9vbHOBr2JyYW5jaDp0bzp0"
    "b29sc7kwMDAwMDAwMDAwMDEuMDAwMDAwMDAwMDAwsHVwZGF0ZWRfY2hhbm5lbHOSqG1lc3NhZ2Vzr2JyYW5jaDp0"
    "bzphZ2VudIWmc291cmNlpGxvb3Ckc3RlcAGncGFyZW50c4CmcnVuX2lk2SQwMDAwMDAwMC0wMDAwLTAwMDAtMDAw"
    "MC0wMDAwMDAwMDAwMDC9Y291bnRlcnNfc2luY2VfZGVsdGFfc25hcHNob3SBqG1lc3NhZ2VzkgECg6Zzb3VyY2Wl"
    "aW5wdXSkc3RlcP+ncGFyZW50c4CKoXYCqmNoZWNrcG9pbnSSp21zZ3BhY2vEAKhtZXRhZGF0YZKnbXNncGFja8QA"
    "p3ByZXNlbnSTqV9fc3RhcnRfX6htZXNzYWdlc69icmFuY2g6dG86YWdlbnSnd3JpdHRlbpGobWVzc2FnZXOmaW5s"
    "aW5lga9icmFuY2g6dG86YWdlbnSSp21zZ3BhY2vEAKRoZWxkgKRydW5zgahtZXNzYWdlc4SkcmVmc5ChbgClbGV2"
    "ZWwAo293bsQAo3Jhd4CkbG9nc4GobWVzc2FnZXOFpHJlZnOQoW4ApWxldmVsAKNvd27EAKRzZWVkgqF2oKJhdKCE"
    "oXYBp3Rhc2tfaWTZJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMKl0YXNrX3BhdGi1fl9fcHJl"
    "Z2VsX3B1bGwsIGFnZW50pndyaXRlc5KUAKhtZXNzYWdlc6dtc2dwYWNrxACUAa9icmFuY2g6dG86dG9vbHOnbXNn"
    "cGFja8QAgahtZXNzYWdlc5GSpHVzZXKgx60FlL5sYW5nY2hhaW5fY29yZS5tZXNzYWdlcy5zeXN0ZW2tU3lzdGVt"
    "TWVzc2FnZYanY29udGVudKCxYWRkaXRpb25hbF9rd2FyZ3OAsXJlc3BvbnNlX21ldGFkYXRhgKR0eXBlpnN5c3Rl"
    "baRuYW1lwKJpZNkkMDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAws21vZGVsX3ZhbGlkYXRlX2pz"
    "b27H0gWUvGxhbmdjaGFpbl9jb3JlLm1lc3NhZ2VzLnRvb2yrVG9vbE1lc3NhZ2WJp2NvbnRlbnSgsWFkZGl0aW9u"
    "YWxfa3dhcmdzgLFyZXNwb25zZV9tZXRhZGF0YYCkdHlwZaR0b29spG5hbWWgomlk2SQwMDAwMDAwMC0wMDAwLTAw"
    "MDAtMDAwMC0wMDAwMDAwMDAwMDCsdG9vbF9jYWxsX2lkpGNhbGyoYXJ0aWZhY3TApnN0YXR1c6dzdWNjZXNzs21v"
    "ZGVsX3ZhbGlkYXRlX2pzb27HqgWUvWxhbmdjaGFpbl9jb3JlLm1lc3NhZ2VzLmh1bWFurEh1bWFuTWVzc2FnZYan"
    "Y29udGVudKCxYWRkaXRpb25hbF9rd2FyZ3OAsXJlc3BvbnNlX21ldGFkYXRhgKR0eXBlpWh1bWFupG5hbWXAomlk"
    "2SQwMDAwMDAwMC0wMDAwLTAwMDAtMDAwMC0wMDAwMDAwMDAwMDCzbW9kZWxfdmFsaWRhdGVfanNvbsgBPwWUumxh"
    "bmdjaGFpbl9jb3JlLm1lc3NhZ2VzLmFpqUFJTWVzc2FnZYmnY29udGVudKCxYWRkaXRpb25hbF9rd2FyZ3OAsXJl"
    "c3BvbnNlX21ldGFkYXRhgq1maW5pc2hfcmVhc29upHN0b3CqbW9kZWxfbmFtZaCkdHlwZaJhaaRuYW1lwKJpZNkk"
    "MDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAwqnRvb2xfY2FsbHORhKRuYW1loKRhcmdzgKJpZKRj"
    "YWxspHR5cGWpdG9vbF9jYWxssmludmFsaWRfdG9vbF9jYWxsc5CudXNhZ2VfbWV0YWRhdGGDrGlucHV0X3Rva2Vu"
    "cwGtb3V0cHV0X3Rva2VucwGsdG90YWxfdG9rZW5zArNtb2RlbF92YWxpZGF0ZV9qc29ux9EFlLpsYW5nY2hhaW5f"
    "Y29yZS5tZXNzYWdlcy5haalBSU1lc3NhZ2WJp2NvbnRlbnSgsWFkZGl0aW9uYWxfa3dhcmdzgLFyZXNwb25zZV9t"
    "ZXRhZGF0YYCkdHlwZaJhaaRuYW1lwKJpZNkkMDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAwqnRv"
    "b2xfY2FsbHOQsmludmFsaWRfdG9vbF9jYWxsc5CudXNhZ2VfbWV0YWRhdGHAs21vZGVsX3ZhbGlkYXRlX2pzb24="
)
"""Version 1: serialized checkpoint, metadata, envelopes and messages with empty fields."""
