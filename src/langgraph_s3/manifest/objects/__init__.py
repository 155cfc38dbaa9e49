"""The manifest on object storage alone (``manifest="s3"``): the table port
(:class:`~langgraph_s3.manifest.table.TablePort`) over an object store's conditional
writes, so the manifest's rules run unchanged without DynamoDB.

Each item is an append-only series of whole-item versions, each created with
``If-None-Match: *`` on a key of its own (no key is rewritten per commit: R2's and
GCS's one-write-a-second-per-key limit holds); the newest is found by one GET from a
cached copy or one LIST and one GET cold. See :mod:`.table` for the costs and
:mod:`.tx` for transactions.
"""

from langgraph_s3.manifest.objects.table import ObjectTable

__all__ = ["ObjectTable"]
