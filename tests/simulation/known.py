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

KNOWN: dict[int, str] = {}
"""Seed (of the default run, or of the soaks of seeds 40000-99999, three a cause at most)
-> the cause of its first finding (``WHY``)."""

_SOAKED: dict[str, str] = {}
SOAK_OPEN: dict[int, str] = {
    int(seed): cause for cause, seeds in _SOAKED.items() for seed in seeds.split()
}
"""The soak's other failing seeds, each on an open cause of ``WHY``: not run with the
default seeds (they would double the run), kept to replay
(``LANGGRAPH_S3_SIM_SEED=N``) and to run again once a cause is fixed."""

WHY: dict[str, str] = {
    "import-beside-deletion": "an import of a thread (its own export, the same ids, read "
    "while a delete_for_runs removed two of its runs) claims the thread after a "
    "delete_thread of it ended (the claim sees the tombstone: a new life, rightly), "
    "writes its checkpoints and publishes (ok); a read then finds a checkpoint naming "
    "objects of a removed run, whose keys hold delete_for_runs's erasure markers and "
    "which the import never wrote (corrupt-read). Traced 2026-12-05: not the process's "
    "knowledge of the old life's holders (forgetting it at the claim changes nothing); "
    "suspect: the export, taken beside delete_for_runs, holds a child whose parent's run "
    "was removed, and the import's put takes that parent's object as its values' holder. "
    "Next: an export is a snapshot (no checkpoint without its parent), or an import's put "
    "refuses a holder outside its file. Found by the soak of seeds 160000-165999 (1 of "
    "6,000); present at f09b360. Seed 163189 passes since held writes (2026-12-05) changed "
    "its trace: the cause is not proven fixed (a soak of seeds 160000-165999 looks again)"
}
"""What each open cause is, traced to the line in src (the kind of finding: ``checks.py``,
``conservation.py``)."""

FOUND: dict[int, str] = {
    126137: "a rollback whose listing came after a packing moved the thread's loose "
    "objects into its pack retipped from what was left loose: a packed fork's head was "
    "dropped, acknowledged checkpoints lost (fixed: maintenance's commits are "
    "conditioned on the packings the root counts)",
    124038: "a read whose first attempt laid an old life's held copies over the objects "
    "read them again in its next attempt, in the life an import's replace published "
    "(the same ids): a false CorruptObjectError (fixed: each attempt takes its copies out)",
    125387: "a second import of a thread met the first's claim and failed at once (fixed: "
    "it waits while the claim is not renewed)",
    115489: "an import whose put failed (a lost answer) and whose removal's first request "
    "failed too left the checkpoints it committed readable, a prefix of the file (fixed "
    "by staging: an import's items are published in one transaction at its end)",
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
    41: "a copy_thread that gave up after a round that copied objects (its source "
    "deleted, rolled back or replaced meanwhile) left them in a target no item names: "
    "nothing would ever remove them (fixed: a copy that ends without committing removes "
    "what it wrote from a target that has no item, as a TTL sweep would)",
    48: "the same",
    113: "the same, a copy cut by a source object gone mid-round (its copies were not "
    "counted as written)",
    53328: "a copy_thread beside an import's replace copied the erasure markers the "
    "replace's deletion had put at the ids it re-imports, then skipped them as copied "
    "(same key, same ETag listed): a committed target reading as nothing (fixed: each "
    "CopyObject is conditioned on the ETag the listing showed)",
    52753: "a copy_thread racing two import replaces of its source reported a history "
    "the source never had (the same fix: a copy copies the version it listed or none)",
    54635: "a rollback that emptied a namespace left the moved copies (h/) and writes "
    "earlier rollbacks kept for its checkpoints under its dropped item (fixed: what is "
    "left under an emptied namespace goes with it, under the rollback's mark)",
    49088: "a rollback that emptied a copy's target left the checkpoints the copy had "
    "brought from below its source's floor (the same fix)",
    43978: "a held copy's PUT of a frozen writer landed after a deletion that followed a "
    "rollback: the rollback had stored the copy and deleted its object, leaving no "
    "marker (fixed: a removal marks the recent checkpoint keys it removes)",
    1915: "a deletion took the erasure markers an earlier deletion left (fixed: they stay)",
    1333: "a deletion cut short while it wrote its markers, after its DeleteObjects: the "
    "next attempt no longer listed the keys left unmarked (fixed: markers first, then "
    "the deletes)",
    53001: "a held copy's PUT landed 2-5 minutes after it was sent (its writer frozen "
    "meanwhile), past the 90 s window markers were written for (fixed: the window is "
    "S3's 15 minutes for a signed request)",
    32: "the same, after an import's replace",
    417: "a delete_thread cut after its root's tombstone (the follow-up taking the held "
    "copies out failed) left a revivable tombstone holding the conversation's envelopes "
    "(fixed: a deletion cut while it tombstones puts back the items it knows as they "
    "were; when that fails too, the conservation counts the failed call's tombstone, "
    "whose error says to call again)",
    685: "the same, an import's replace whose deletion failed",
    1223: "a put_writes of the old life (the writes of a checkpoint committed before a "
    "deletion began) landed after the deletion listed the thread: its w/ object, the "
    "conversation's content, outlived the deletion; write keys name task ids a deletion "
    "cannot know, so no marker can refuse them (fixed: a deletion records a late pass, "
    "which the next sweep runs once a PUT sent before it has landed; a put_writes past "
    "its license asks the item first)",
    40242: "the same, after an import's replace (the new life reuses the old ids: the "
    "pass keeps the writes of checkpoints the new history holds)",
    40784: "the same",
    98519: "an import whose put failed removed what it wrote with delete_thread; that "
    "deletion failed as well after its tombstones (its lease renewal's answer lost) and "
    "put the thread back: part of the file readable (fixed: a failed import's removal "
    "never revives; the thread stays deleted and the next sweep finishes it)",
    92208: "the same (up to this fix: the interleaving had moved)",
    70817: "a reader cached an erasure marker it read under a key an import's new life "
    "had committed and not yet stored, and later read the marker from its cache as the "
    "checkpoint: a CorruptObjectError with no fault (fixed: a marker is never cached)",
}
"""Seeds outside the default run (found by soaks) that once found a defect, now fixed:
run with the default seeds, so that the defect shows again if it comes back."""
