"""Seeds that found a defect: the ratchet of test_seeds.

``KNOWN``: seeds (of the default run or of soaks) whose defect is open, each with its
cause (``WHY``: what it is, down to the line in src), run with the default seeds; the
test fails when one of them passes (remove it here: the fix is proven) and when any
other seed fails (a regression). ``SOAK_OPEN``: the soak's other seeds on those open
causes (not run by default). ``FOUND``: seeds of soaks whose defect was fixed, run with
the default seeds so that none comes back. Replay one exactly:
``LANGGRAPH_S3_SIM_SEED=N .venv/bin/pytest tests/simulation -k replay -n 0``.
"""

from __future__ import annotations

KNOWN: dict[int, str] = {
    19: "copy-left",
    32: "late-put-past-window",
    41: "copy-left",
    48: "copy-left",
    113: "copy-left",
    156: "copy-left",
    201: "copy-left",
    244: "copy-left",
    246: "copy-left",
    290: "copy-left",
    417: "held-stored",
    450: "copy-left",
    454: "copy-left",
    638: "copy-left",
    662: "copy-left",
    672: "copy-left",
    685: "held-stored",
    730: "copy-left",
    808: "copy-left",
    847: "copy-left",
    954: "copy-left",
    987: "copy-left",
    1148: "copy-left",
    1223: "writes-after-removal",
    1229: "copy-left",
    1256: "copy-left",
    1330: "copy-left",
    1418: "copy-left",
    1440: "copy-left",
    1672: "copy-left",
    1822: "copy-left",
    1890: "copy-left",
    1915: "late-put-past-window",
    1984: "copy-left",
    40119: "copy-left",
    40217: "copy-left",
    40242: "writes-after-removal",
    40784: "writes-after-removal",
    43978: "late-put-past-window",
    44393: "late-put-past-window",
    52753: "copy-not-snapshot",
}
"""Seed (of the default run, or of the soak of seeds 40000-59999, three a cause at most)
-> the cause of its first finding (``WHY``)."""

_SOAKED: dict[str, str] = {
    "copy-left": (
        "40263 40417 40479 40494 40521 40572 40586 40594 40661 40732 40811 40921 40929 "
        "40942 41042 41139 41161 41171 41197 41246 41308 41349 41390 41568 41576 41617 "
        "41626 41704 41761 41777 41812 41837 41917 41971 42048 42077 42099 42131 42140 "
        "42203 42250 42383 42397 42569 42602 42604 42627 42712 42762 42832 42844 42919 "
        "42976 43048 43147 43168 43218 43295 43337 43379 43517 43598 43635 43781 43874 "
        "43927 44066 44165 44166 44177 44372 44386 44453 44458 44568 44680 44754 44922 "
        "45090 45210 45230 45428 45442 45519 45591 45615 45802 45824 45907 45916 46180 "
        "46191 46385 46392 46403 46446 46449 46515 46621 46655 47026 47249 47252 47289 "
        "47323 47425 47450 47569 47676 47718 47771 47824 47880 47895 47955 47958 48021 "
        "48038 48141 48169 48175 48278 48282 48306 48351 48460 48500 48517 48538 48552 "
        "48553 48665 48834 48892 49033 49088 49150 49176 49177 49227 49247 49332 49405 "
        "49458 49488 49623 49677 49797 49884 49919 50039 50055 50184 50210 50227 50264 "
        "50304 50357 50509 50529 50565 50617 50630 50661 50686 50697 50853 50906 51106 "
        "51171 51173 51176 51222 51235 51242 51313 51321 51344 51347 51384 51473 51500 "
        "51543 51636 51637 51663 51676 51678 51744 51760 52000 52053 52135 52420 52621 "
        "52659 52673 52690 52774 53073 53210 53304 53328 53349 53364 53391 53479 53623 "
        "53635 53647 53894 53900 53903 53929 53952 54007 54130 54635 54646 54651 54734 "
        "54856 54973 55046 55193 55294 55415 55422 55450 55487 55548 55626 55727 55925 "
        "55996 56108 56136 56220 56247 56291 56308 56325 56333 56499 56551 56592 56640 "
        "56747 56752 56772 56890 57011 57222 57359 57381 57392 57415 57496 57580 57811 "
        "57869 57893 57932 57958 58062 58133 58263 58267 58362 58374 58423 58424 58483 "
        "58496 58515 58606 58702 58720 58806 58857 58861 58872 58932 58935 59018 59070 "
        "59099 59117 59177 59335 59553 59627 59642 59691 59703 59813 59920"
    ),
    "writes-after-removal": ("44375 45983 46162 47266 47843 49875 51077 52765 59811"),
    "late-put-past-window": ("46972 49324 51204 53001 57782 59002 59205"),
}
SOAK_OPEN: dict[int, str] = {
    int(seed): cause for cause, seeds in _SOAKED.items() for seed in seeds.split()
}
"""The soak's other failing seeds, each on an open cause of ``WHY``: not run with the
default seeds (they would double the run), kept to replay
(``LANGGRAPH_S3_SIM_SEED=N``) and to run again once a cause is fixed."""

WHY: dict[str, str] = {
    "copy-left": "copy_thread gives up after a round that copied objects: its re-read finds "
    "the source gone (deleted, rolled back to nothing, replaced) or nothing a reader could "
    "see, and it returns skipped (checkpoint/maintenance/copying.py:63-64 and :96-97) "
    "without removing what the earlier round copied; the target has no item, so no "
    "deletion, sweep or stream record ever reaches those objects: the source's content "
    "outlives the source's deletion under the target's prefix",
    "writes-after-removal": "a put_writes of the old life (the writes of a checkpoint "
    "committed before a deletion or an import's replace began) lands after the removal "
    "listed the thread: writes are PUT with no manifest check (checkpoint/pending.py:75, "
    "_put_write at :92) and a deletion marks checkpoint keys only "
    "(checkpoint/maintenance/deletion.py:188, found[1] == 'c'): the w/ object, the "
    "conversation's content, outlives the deletion",
    "late-put-past-window": "a held copy's PUT in flight when its Lambda froze lands at "
    "the thaw, minutes after a deletion or a replace of its thread: markers cover the "
    "checkpoints stored within late_put_seconds (checkpoint/maintenance/deletion.py:176-"
    "190), a later deletion deletes an earlier one's markers with the objects "
    "(deletion.py:167), a prune or rollback deletes a stored copy's object with no marker "
    "(checkpoint/maintenance/base.py:262): the open items of docs/guarantees.md's "
    "'Erasure is erasure' (a request cut off by its deadline is assumed)",
    "half-done": "an import whose put failed (a lost answer) removes what it wrote with "
    "delete_thread (checkpoint/transfer/importing.py:164); that deletion fails as well "
    "(its lease renewal's answer lost) before removing anything and revives the thread "
    "(checkpoint/maintenance/deletion.py:153-155, revive(undo)): the failed import leaves "
    "part of its file readable (its error's note says so); a double fault (its soak seeds, "
    "44511 55615 56145, pass on main since the merge of commits that moved their "
    "interleavings: the cause is not fixed)",
    "held-stored": "after a delete_thread that failed (a 503) after its tombstone, the "
    "thread's root item still holds a copy whose object is stored: Settling.namespaces "
    "reads live entries only, so no maintenance ever settles it (not fully traced: "
    "checkpoint/maintenance/deletion.py revive, settling.py:42)",
    "copy-not-snapshot": "a copy_thread racing two import replaces of its source (a packer "
    "and frozen writers beside) reported success with a target holding a checkpoint "
    "without its parent, a history the source never had: the copy's listing and its "
    "manifest read met different lives of the same ids (same latest ids after a replace "
    "with the same file); not traced to a line yet (checkpoint/maintenance/copying.py:"
    "75-98, the round that lists, copies, reads again and merges)",
}
"""What each open cause is, traced to the line in src (the kind of finding: ``checks.py``,
``conservation.py``)."""

FOUND: dict[int, str] = {
    14407: "an export's manifest read met a latest whose object was in flight and its "
    "listing came after that landing: the export held the latest but not a fork "
    "committed before the landing (fixed by commits that carry the checkpoint: the "
    "latest is readable the moment it is committed)",
    1790: "a copy beside packers that repack without pause: a copy of a key moved into "
    "a pack after the copier noted the thread unpacked was a NotFoundError",
    1973: "a copy whose latest landed between its read and its listing, after a fork: "
    "the latest without the fork",
    3977: "the same, on a busy thread",
    916: "a copy waiting for a latest whose thread was deleted meanwhile",
    1145: "the same, beside a pruner",
    283: "an export beside packers: stale listings counted as packings",
    2226: "an unpacking's writes landing in the life an import's replace began",
    11047: "the same, beside a copier",
    3645: "a copy beside packers, starting over at each pack",
    6694: "the same, 64 rounds lost",
    7043: "an export's listing pinned to an entry whose latest was in flight: the "
    "latest without a fork made before it landed",
    10288: "a packing whose listing met a pack another packer had just replaced",
    10570: "an export's first page listed a fork's object landed before its commit, "
    "newer than the latest it had not listed yet: an empty export",
    6427: "a copy's target named a latest in flight in the source (never copied): a "
    "delete_for_runs on the target waited for it as a put in flight",
    16053: "a rollback (delete_for_runs) that rebuilt the heads from its listing "
    "dropped a fork whose put was in flight: an acknowledged checkpoint lost",
    18214: "an import's replace wrote its objects beside its first commit while an "
    "unpacking of the old life was still writing the same keys",
    21666: "a packing whose listing met a pack another packer had just replaced",
    7943: "a turn's read that met an import's new life between its manifest read and "
    "its objects: a CorruptObjectError",
    24387: "a delete_for_runs whose scan met a thread an import's replace had "
    "tombstoned: the deletion failed and put the thread back, the runs' checkpoints "
    "with it, and the rollback reported success",
    30516: "a turn's put beside an import's replace: the PUT asked the pack it had noted "
    "in the old life whether it held the key, met it gone with the replace and called it "
    "corrupt (PackGoneError) instead of following the manifest to the new life",
    31319: "the same (up to commit 85c11be: the interleaving has moved since)",
    33209: "the same, beside pruners",
    54: "an import's replace met the erasure markers its own deletion left on the ids it "
    "imports: a checkpoint over 8 KB was refused by the marker (fixed: a PUT over a "
    "marker is allowed while the thread's item is alive)",
    242: "the same",
    40044: "the same, a carried checkpoint whose PUT landed after its commit",
    293: "a put_writes through the packed store met the pack it had noted gone (an "
    "unpack or repack): PackGoneError with no fault (fixed: the put asks the manifest "
    "again)",
    42857: "the same",
    44286: "the same",
}
"""Seeds outside the default run (found by soaks) that once found a defect, now fixed:
run with the default seeds, so that the defect shows again if it comes back."""
