"""The items of an import's stage (``core.staging``) as the table holds them."""

from __future__ import annotations

import logging
from typing import Any

from langgraph_s3.core.staging import Claim

logger = logging.getLogger("langgraph_s3.manifest")

STAGE_MARK = "~stage/"
"""After the deployment key, the partition of one thread's import in progress
(``core.staging``; ``keys.encode`` never yields ``~s``)."""
STAGE_SK = "~stage"
"""Sort key of an import's claim in its stage partition."""
STAGE_TOKEN, STAGE_UNTIL, STAGE_UPTO = "stage_token", "stage_until", "stage_upto"
STAGE_REV, STAGE_ROOT = "stage_rev", "stage_root"
"""On an import's claim: ``Claim``'s fields."""


def claim_of(item: dict[str, Any] | None) -> Claim | None:
    """The import's claim an item of its stage partition holds (None: none). One this
    library did not write (a hand edit) is taken as a claim that ran out, with a
    warning: it holds no import off, and the sweep drops what is under it."""
    if item is None:
        return None
    try:
        rev = item.get(STAGE_REV, {}).get("N")
        return Claim(
            str(item[STAGE_TOKEN]["S"]),
            int(item[STAGE_UNTIL]["N"]),
            str(item[STAGE_UPTO]["S"]),
            int(rev) if rev is not None else None,
            str(item.get(STAGE_ROOT, {}).get("S", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        logger.warning(
            "an import's claim langgraph-s3 did not write: key %r; taken as run out",
            {k: item.get(k) for k in ("pk", "sk")},
        )
        return Claim("", 0, "")
