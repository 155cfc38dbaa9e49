"""The doctor's checks of a manifest kept in the bucket (``manifest="s3"``), in place of
the table's: the manifest is there, and racing create-only PUTs leave one winner (the
sequential conditions are probed for every deployment, ``doctor.py``)."""

from __future__ import annotations

from langgraph_s3.aws.s3 import RACERS, check_racing_creates
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.errors import ConditionsIgnoredError
from langgraph_s3.manifest.objects import ObjectTable

__all__ = ["object_manifest_checks"]

Line = tuple[str, bool, str, str]
"""(name, passed, detail, fix): one line of the doctor's answer."""


async def object_manifest_checks(
    table: ObjectTable, objects: ObjectStorePort, root: str
) -> list[Line]:
    """The manifest's marker (1 GET) and the racing-creates probe (9 requests)."""
    out: list[Line] = []
    try:
        there = await table.exists()
        fix = "" if there else "run `langgraph-s3 setup` (or setup()) with ?manifest=s3"
        out.append(("manifest", there, f"{table.name} (in the bucket, no table)", fix))
    except Exception as exc:
        out.append(("manifest", False, f"{type(exc).__name__}: {exc}"[:200], ""))
    try:
        await check_racing_creates(objects, root)
        detail = f"{RACERS} racing If-None-Match PUTs of one key: exactly one won"
        out.append(("conditional PUT: racing creates", True, detail, ""))
    except ConditionsIgnoredError as exc:
        out.append(("conditional PUT: racing creates", False, exc.problem, exc.FIX))
    except Exception as exc:
        out.append(("conditional PUT: racing creates", False, f"{type(exc).__name__}: {exc}", ""))
    return out
