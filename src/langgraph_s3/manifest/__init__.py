"""The manifest: which checkpoints exist, per deployment, thread and namespace.

:class:`Manifest` (:mod:`.facade`) holds the rules, written once over a narrow table
port (:mod:`.table`, its conditions as data in :mod:`.conditions`); :mod:`.schema` the
items' attributes and wire format; :mod:`.dynamodb` is that table on DynamoDB;
:mod:`.decide` the pure decisions. The value types they speak in live in
:mod:`langgraph_s3.core.records`. All are here too,
under the path they had before the package moved into folders
(``from langgraph_s3.manifest import Manifest, Entry``).
"""

from langgraph_s3.core.records import (
    DELETE_LEASE_SECONDS,
    DELETING,
    GRACE_SECONDS,
    IN_FLIGHT_SECONDS,
    Deletion,
    Entry,
    Expiry,
    Fields,
    Raw,
    ThreadInfo,
    bound_live,
    held,
    mark_until,
    marks_until,
    may_land,
    removal_mark,
    uuid6_time,
)
from langgraph_s3.manifest.decide import (
    GONE_LIMIT,
    GONE_SECONDS,
    HEADS_INLINE,
    LAYOUT_VERSION,
    LEASE_POLL_SECONDS,
    META_SK,
    RETIP_RUNS,
    RETIRED,
    TOMBSTONE_SECONDS,
    Group,
    demoted,
    deployment_key,
    expiry_attribute,
    new_life,
    trim_gone,
    whole_item,
)
from langgraph_s3.manifest.dynamodb import ACTIVE_POLLS, ATTRIBUTES, KEY_SCHEMA, DynamoTable
from langgraph_s3.manifest.facade import Manifest
from langgraph_s3.manifest.schema import IDLE_ATTRIBUTE, REMOVING, REVIVABLE, ROOT_SK, TTL_ATTRIBUTE

__all__ = [
    "ACTIVE_POLLS",
    "ATTRIBUTES",
    "DELETE_LEASE_SECONDS",
    "DELETING",
    "GONE_LIMIT",
    "GONE_SECONDS",
    "GRACE_SECONDS",
    "HEADS_INLINE",
    "IDLE_ATTRIBUTE",
    "IN_FLIGHT_SECONDS",
    "KEY_SCHEMA",
    "LAYOUT_VERSION",
    "LEASE_POLL_SECONDS",
    "META_SK",
    "REMOVING",
    "RETIP_RUNS",
    "RETIRED",
    "REVIVABLE",
    "ROOT_SK",
    "TOMBSTONE_SECONDS",
    "TTL_ATTRIBUTE",
    "Deletion",
    "DynamoTable",
    "Entry",
    "Expiry",
    "Fields",
    "Group",
    "Manifest",
    "Raw",
    "ThreadInfo",
    "bound_live",
    "demoted",
    "deployment_key",
    "expiry_attribute",
    "held",
    "mark_until",
    "marks_until",
    "may_land",
    "new_life",
    "removal_mark",
    "trim_gone",
    "uuid6_time",
    "whole_item",
]
