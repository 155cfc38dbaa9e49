"""Seeds that found a defect: the ratchet of test_seeds.

``KNOWN``: seeds (of the default run or of soaks) whose defect is open, run with the
default seeds; the test fails when one of them passes (remove it here: the fix is
proven) and when any other seed fails (a regression). ``FOUND``: seeds of soaks whose
defect was fixed, run with the default seeds so that none comes back. Replay one exactly:
``LANGGRAPH_S3_SIM_SEED=N .venv/bin/pytest tests/simulation -k replay -n 0``.
"""

from __future__ import annotations

KNOWN: dict[int, str] = {
    19: "conservation-copy-left",
    32: "conservation-ended-life",
    41: "conservation-copy-left",
    48: "conservation-copy-left",
    113: "conservation-copy-left",
    156: "conservation-copy-left",
    201: "conservation-copy-left",
    244: "conservation-copy-left",
    246: "conservation-copy-left",
    290: "conservation-copy-left",
    417: "conservation-held-stored",
    450: "conservation-copy-left",
    454: "conservation-copy-left",
    638: "conservation-copy-left",
    662: "conservation-copy-left",
    672: "conservation-copy-left",
    685: "conservation-held-stored",
    730: "conservation-copy-left",
    808: "conservation-copy-left",
    847: "conservation-copy-left",
    954: "conservation-copy-left",
    987: "conservation-copy-left",
    1148: "conservation-copy-left",
    1223: "conservation-ended-life",
    1229: "conservation-copy-left",
    1256: "conservation-copy-left",
    1330: "conservation-copy-left",
    1418: "conservation-copy-left",
    1440: "conservation-copy-left",
    1672: "conservation-copy-left",
    1822: "conservation-copy-left",
    1890: "conservation-copy-left",
    1915: "conservation-ended-life",
    1984: "conservation-copy-left",
}
"""Seed (of the default run or of a soak) -> the kind of its first finding
(``checks.py``; see ``WHY``)."""

WHY: dict[str, str] = {
    "conservation-copy-left": "a copy_thread that ended without committing anything in its "
    "target (its source deleted or replaced meanwhile, or nothing left to copy) leaves the "
    "objects it wrote there, under a thread no item names: nothing removes them (seen "
    "since a subgraph's birth checks its root and a deletion tombstones the root first; "
    "not traced further)",
    "conservation-ended-life": "a put_writes of the old life (LangGraph's tasks' writes of "
    "a checkpoint committed before an import's replace or a deletion began) lands after "
    "the removal listed the thread: its w/ object stays under the ended life. Writes are "
    "stored unconditionally (checkpoint/pending.py:75, no manifest check) and a deletion "
    "marks only checkpoint keys (checkpoint/maintenance/deletion.py:188, found[1] == 'c')",
    "conservation-orphan": "a copy_thread (calm worlds, no removal anywhere) leaves in its "
    "target a committed source checkpoint's object the target's history never names: the "
    "copy listed an object whose commit its manifest read did not see (the object landed "
    "beside a held copy's commit); unreachable garbage in the target (not fully traced)",
    "conservation-held-stored": "after a delete_thread that failed (a 503) after its "
    "tombstone, the thread's root item still holds a copy whose object is stored: "
    "Settling.namespaces reads live entries only, so no maintenance ever settles it (not "
    "fully traced: checkpoint/maintenance/deletion.py:137 revive, settling.py:42)",
    "spurious-failure": "a turn beside a packer and an importer failed with PackGoneError "
    "(the manifest names a pack an unpack or repack removed) with no fault injected: a "
    "read of a pack replaced under it (checkpoint/packs.py); an older kind of defect this "
    "seed reaches now that the worlds' shapes changed",
}
"""What each kind of open finding is, as far as it was traced."""

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
}
"""Seeds outside the default run (found by soaks) that once found a defect, now fixed:
run with the default seeds, so that the defect shows again if it comes back."""
