"""The saver's wiring: its clients, ports, layout and shared context."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Sequence,
)
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_s3.aws.clients import (
    ClientFactory,
    Limits,
    Target,
    check_table_name,
)
from langgraph_s3.aws.config import check_manifest_kind, receipts_location
from langgraph_s3.aws.probes import check_conditions, check_racing_creates
from langgraph_s3.aws.s3 import ObjectStore
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.checkpoint.context import SaverContext
from langgraph_s3.checkpoint.maintenance import Maintenance
from langgraph_s3.checkpoint.packs import PackedObjects
from langgraph_s3.checkpoint.reading import Reader
from langgraph_s3.core.meta import index_keys
from langgraph_s3.core.ports import KeyVaultPort, ManifestPort, ObjectStorePort
from langgraph_s3.core.records import INDEXED, METADATA_RECORDED, MIGRATED, RUNS_INDEXED, Entry
from langgraph_s3.core.subject_keys import DEFAULT_TTL
from langgraph_s3.core.subject_policy import SubjectPolicy, policy_of
from langgraph_s3.core.tasks import gather_all
from langgraph_s3.errors import InvalidRequestError, MissingResourceError
from langgraph_s3.manifest import Manifest, deployment_key
from langgraph_s3.manifest.objects import ObjectTable
from langgraph_s3.manifest.schema import DEFAULT_TABLE, ROOT_SK, index_name
from langgraph_s3.manifest.table import TablePort
from langgraph_s3.runtime.foundation import foundation
from langgraph_s3.runtime.operations import operation
from langgraph_s3.runtime.sealed_objects import SealedObjects
from langgraph_s3.runtime.sealed_table import SealedTable
from langgraph_s3.runtime.subjects import deployment_subjects
from langgraph_s3.runtime.thread_seals import ThreadSeals

if TYPE_CHECKING:
    pass


DEFAULT_CACHE_BYTES = 64 * 1024 * 1024

Namespaces = AsyncGenerator[tuple[str, str, Entry | Awaitable[Entry | None] | None], None]
"""(thread, namespace, its manifest entry: known, still on its way, or to be read)."""


_GENERIC_WALK = BaseCheckpointSaver.aget_delta_channel_history.__code__


WALK_FRAMES = 16
"""Frames above a read searched for the walk: the adapter's, the saver's façade and its
part's, LangGraph's own (a read by id sits 5 frames below the walk today)."""


def walk_scope(ctx: SaverContext) -> int | None:
    """The run of LangGraph's generic DeltaChannel walk this read is a step of, if any.

    LangGraph's Agent Server wraps the saver in an adapter that inherits
    ``BaseCheckpointSaver.aget_delta_channel_history`` instead of forwarding ours: that
    walk reads the ancestors one ``aget_tuple`` by id at a time. Found on the stack,
    the walk's reads share one listing (``Listed``); its first read starts afresh.
    """
    try:
        frame = sys._getframe(2)
    except ValueError:  # the bottom of a thread's stack: no walk above it
        return None
    for _ in range(WALK_FRAMES):
        if frame is None:
            return None
        if frame.f_code is _GENERIC_WALK:
            scope = id(frame)
            if "target_tuple" not in frame.f_locals:  # the walk's first read
                for k in [k for k in ctx.listed if k[0] == scope]:
                    ctx.listed.pop(k, None)
            return scope
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _refuse_inverted_versions(thread_id: str, checkpoint: Checkpoint) -> None:
    """Refuse a checkpoint whose newer versions sort below older ones as strings.

    LangGraph compares versions as strings. A thread begun with 12-digit counters and
    continued by a saver padding to 32 (LangGraph's Agent Server's adapter does,
    whatever the saver says) gets new versions that sort below the old ones: its
    graph silently skips the input. Said here, before anything is stored. (Cost: a
    glance at the widths; a sort only when they differ.)
    """
    versions = checkpoint.get("channel_versions") or {}
    found: list[tuple[int, str, str]] = []
    for ch, v in versions.items():
        if isinstance(v, str) and (head := v.split(".", 1)[0]).isdigit():
            found.append((int(head), v, str(ch)))
    if len({len(v.split(".", 1)[0]) for _, v, _ in found}) < 2:
        return
    found.sort()
    above: tuple[int, str, str] | None = None  # the largest string of smaller counters
    for n, v, ch in found:
        if above is not None and above[0] < n and v < above[1]:
            raise InvalidRequestError(
                f"thread {thread_id!r} holds channel versions of two widths: {above[2]!r} "
                f"is at {above[1]!r} and {ch!r}, newer, at {v!r}, which sorts below it, so "
                "LangGraph would not see this step as new (an input skipped; a resume's "
                "writes, already stored, never applied). The thread was begun with 12-digit "
                "versions (langgraph-s3 before 0.1) and is continued by something padding "
                "to 32 (LangGraph's Agent Server). Continue it directly, or carry it over "
                "once: `langgraph-s3 export THREAD -o t.jsonl` then "
                "`langgraph-s3 import t.jsonl --replace` (which rewrites them)."
            )
        if above is None or v > above[1]:
            above = (n, v, ch)


VERSION_WIDTH = 32
"""Digits of a channel version's counter: LangGraph's own width (see get_next_version)."""
LEGACY_VERSION_WIDTH = 12
"""The width threads written before 0.1 use, kept when they are continued."""


class Wiring:
    """What a saver is built of, made once and held by each of its parts: where it
    stores (target, layout), its clients, object store, manifest and context, its
    limits, its TTL sweeper and background loop; and the calls of the deployment's
    setup, verification and flush.

    Args: as :class:`~langgraph_s3.AsyncS3Saver`'s (it passes them on, but ``serde``).
    """

    object_table: ObjectTable | None = None
    """The manifest's objects (``manifest="s3"``): the sweep frees their old versions."""
    serde: SerializerProtocol = BaseCheckpointSaver.serde
    """The saver's serializer (LangGraph's default until the saver sets its own; a copy
    ``with_allowlist`` makes has another)."""

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        table: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        session: Any = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        concurrency: int = 32,
        thread_ttl_days: float | timedelta | None = None,
        thread_ttl_refresh_on_read: bool = False,
        sweep_interval_minutes: float = 60.0,
        max_attempts: int = Limits.max_attempts,
        connect_timeout: float = Limits.connect_timeout,
        read_timeout: float = Limits.read_timeout,
        request_timeout: float = Limits.request_timeout,
        max_conflicts: int = Limits.max_conflicts,
        index_metadata: Sequence[str] | None = None,
        object_store: ObjectStorePort | None = None,
        manifest: ManifestPort | str | None = None,
        subjects: SubjectPolicy | str | None = None,
        kms_key: str | KeyVaultPort | None = None,
        subject_key_seconds: float = DEFAULT_TTL,
        subject_label: int | None = None,
        receipts: str | None = None,
    ) -> None:
        base = foundation(
            bucket=bucket,
            prefix=prefix,
            endpoint_url=endpoint_url,
            region=region,
            session=session,
            concurrency=concurrency,
            cache_bytes=cache_bytes,
            limits=Limits(
                connect_timeout, read_timeout, max_attempts, request_timeout, max_conflicts
            ),
            objects=object_store,
        )
        kind = check_manifest_kind(_kind_of(manifest), table, bucket)
        self.object_table = _object_table_of(manifest)
        self.target = Target(
            bucket,
            prefix.strip("/"),
            None if kind == "s3" else check_table_name(DEFAULT_TABLE if table is None else table),
            region,
            endpoint_url,
            kind,
        )
        self.layout, self.clients, self.raw_objects = base.layout, base.clients, base.objects
        """The bucket's objects as S3 lists them (a packed thread's are in its pack)."""
        self.manifest: ManifestPort = (
            manifest
            if manifest is not None and not isinstance(manifest, str)
            else Manifest(
                self._table(kind, deployment_key(bucket, prefix)),
                self.target.table,
                deployment=deployment_key(bucket, prefix),
                ttl_seconds=_ttl_seconds(thread_ttl_days),
                index_metadata=index_keys(index_metadata),
            )
        )
        self.objects = PackedObjects(
            self.raw_objects, self.layout.threads(), lookup=self.manifest.reads.pack_of
        )
        """The objects as every part of the saver sees them: packed threads' keys too."""
        self.concurrency = concurrency
        self.refresh_on_read = thread_ttl_refresh_on_read
        self.sweep_interval_minutes = _positive_minutes(sweep_interval_minutes)
        self.sweeper, self.runner = base.sweeper, base.runner
        self.receipts_at = receipts_location(receipts)  # None: the deployment's own bucket
        policy = policy_of(subjects, subject_label)
        self.seals = self._seals(policy, kms_key, subject_key_seconds, bucket, prefix)
        seen = self._seen_through(self.seals)
        # shared (like the clients and the cache) with the copies with_allowlist makes
        self.ctx = SaverContext(
            seen, self.manifest, self.layout, self.clients.limits, seals=self.seals
        )

    def _table(self, kind: str, deployment: str) -> TablePort | ClientFactory:
        """The manifest's table: DynamoDB's (through the clients), or the bucket's own
        objects under ``{prefix}/manifest/`` (``manifest="s3"``)."""
        if kind == "s3":
            self.object_table = ObjectTable(
                self.raw_objects, self.layout.manifest(), strip=deployment
            )
            return self.object_table
        return self.clients

    def _seen_through(self, seals: ThreadSeals | None) -> ObjectStorePort:
        """The objects as the saver's parts see them: sealed threads' bodies opened."""
        return self.objects if seals is None else SealedObjects(self.objects, self.layout, seals)

    def _seals(
        self,
        policy: SubjectPolicy | None,
        kms_key: str | KeyVaultPort | None,
        key_seconds: float,
        bucket: str,
        prefix: str,
    ) -> ThreadSeals | None:
        """The deployment's subjects, when it declares any: its token secret and keys
        through ``kms_key``, its threads' bodies sealed over the objects and the table."""
        if policy is None:
            return None
        if not isinstance(self.manifest, Manifest):
            raise InvalidRequestError("subjects need the saver's own manifest (a Manifest)")
        deployment = deployment_key(bucket, prefix)
        table = self.manifest.items.db
        people = deployment_subjects(
            self.clients,
            table,
            deployment,
            kms_key=kms_key,
            key_seconds=key_seconds,
            copies=(self.raw_objects, self.layout.subjects_secret()),
            clock=self.manifest.now,
        )

        async def root_item(thread: str) -> dict[str, Any] | None:
            return await table.get({"pk": {"S": deployment + thread}, "sk": {"S": ROOT_SK}})

        seals = ThreadSeals(people, policy, root_item)
        self.manifest.items.db = SealedTable(table, deployment, seals)
        return seals

    @property
    def stats(self) -> RequestStats:
        """Requests, round trips and bytes sent by this saver's clients."""
        return self.clients.stats

    def preload(self) -> None:
        """Load the AWS SDK and its service models now (Lambda init phase)."""
        self.clients.preload()

    def reader(self) -> Reader:
        return Reader(self.ctx, self.serde)

    @operation
    async def _asetup(self, *, dry_run: bool = False) -> list[str]:
        table = self.target.table or DEFAULT_TABLE
        where = f"table {table!r}"
        if self.object_table is not None:
            where = f"the manifest {self.object_table.name}"
        keys: tuple[str, ...] = getattr(self.manifest, "index_metadata", ())
        marker = f"the deployment's layout marker in {where}"
        runs = f"the run index of the deployment's threads in {where}"
        metadata = f"the latest metadata of the deployment's threads in {where}"

        def index_line(key: str) -> str:
            return f"index {index_name(key)!r} of {where} (metadata {key!r})"

        done: list[str] = []
        bucket = await self.objects.bucket_exists()
        if not bucket:
            done.append(f"bucket {self.objects.bucket!r}")
            if not dry_run:
                await self.objects.create_bucket()
        if self.receipts_at is not None and self.receipts_at[0] != self.target.bucket:
            receipts = ObjectStore(self.clients, self.receipts_at[0], concurrency=4, cache_bytes=0)
            if not await receipts.bucket_exists():
                done.append(f"bucket {self.receipts_at[0]!r} (forgetting receipts)")
                if not dry_run:
                    await receipts.create_bucket()
        if not dry_run:  # the probe writes: not in a dry run
            await check_conditions(self.raw_objects, self.layout.root, deletes=False)
            if self.object_table is not None:
                await check_racing_creates(self.raw_objects, self.layout.root)
        new_table = not await self.manifest.setup.exists()
        if new_table:
            made = "(on-demand, TTL on expires_at)"
            if self.object_table is not None:
                made = "(no table: create-only versions in the bucket; expiry by the sweep)"
            done.append(f"{where} {made}")
            if dry_run:  # a new table: the migration only writes its marker
                return [*done, *map(index_line, keys), marker, runs, metadata]
            await self.manifest.setup.create()
        for key in await self.manifest.setup.missing_indexes():
            done.append(index_line(key))
            if not dry_run:
                await self.manifest.setup.create_index(key)
        maintenance = Maintenance(self.ctx, self.serde)
        says = await self.manifest.setup.marker_says()  # one read of the marker
        if MIGRATED not in says:
            done.append(marker)
            if not dry_run and new_table:  # nothing to migrate, index or record
                await self.manifest.setup.mark_migrated(also=(RUNS_INDEXED, METADATA_RECORDED))
                await gather_all(*(self.manifest.setup.marker_add(INDEXED + k) for k in keys))
                return [*done, runs, metadata]
            if not dry_run:
                await maintenance.migrate()
                await self.manifest.setup.mark_migrated()
        # what older versions did not keep, filled in once (a new table holds nothing)
        if RUNS_INDEXED not in says:
            done.append(runs)
            if not dry_run:
                await maintenance.index_runs()
                await self.manifest.setup.marker_add(RUNS_INDEXED)
        due = [INDEXED + k for k in keys if INDEXED + k not in says]
        if METADATA_RECORDED not in says:
            done.append(metadata)
            if not dry_run:
                await maintenance.record_metadata(read_checkpoints=True)
                await self.manifest.setup.marker_add(METADATA_RECORDED)
        elif due and not dry_run:  # a key declared since: its values from what items record
            await maintenance.record_metadata(read_checkpoints=False)
        if not dry_run:  # said once its values are on every older item
            await gather_all(*(self.manifest.setup.marker_add(name) for name in due))
        return done

    @operation
    async def averify(self) -> None:
        """Raise :class:`~langgraph_s3.errors.MissingResourceError` naming the bucket or
        the table when either is missing (``setup`` creates both). For tools and health
        checks: every other call finds out at its first request anyway. It needs only
        what the agent's runtime policy grants (s3:ListBucket, dynamodb:GetItem).

        Cost: HeadBucket and a GetItem side by side (1 round trip).
        """
        fix = "run `langgraph-s3 setup` (or setup()), or apply the terraform module in terraform/"

        async def table() -> None:
            try:
                await self.manifest.setup.migrated()  # a GetItem: the runtime policy's own action
            except MissingResourceError as exc:
                raise MissingResourceError("table", exc.name, fix=fix) from None

        bucket, missing = await asyncio.gather(
            self.objects.bucket_exists(), table(), return_exceptions=True
        )
        if isinstance(bucket, BaseException):
            raise bucket
        if not bucket:  # named first: a mistyped URL is most often its bucket
            raise MissingResourceError("bucket", self.objects.bucket, fix=fix)
        if isinstance(missing, BaseException):
            raise missing

    @operation
    async def aflush(self) -> None:
        """Wait until every checkpoint this saver committed on this event loop is stored
        as its S3 object and no longer held by the manifest (a put returns once the
        manifest holds it: ``inline.py``). Costs the PUTs still in flight and 1
        UpdateItem per namespace whose item held them; ``aclose`` calls it. A checkpoint
        whose PUT failed stays held: the next writer or maintenance stores it."""
        await self.ctx.held.drain(self.ctx.manifest)

    def maintenance(self) -> Maintenance:
        """The whole-thread operations on this saver's objects and manifest (delete,
        sweep, prune, pack, unpack, copy, one thread at a time), for the stream handler
        and tools; the saver's own methods are these, one operation per call. No request."""
        return Maintenance(self.ctx, self.serde)


def _object_table_of(manifest: ManifestPort | str | None) -> ObjectTable | None:
    if isinstance(manifest, Manifest) and isinstance(manifest.items.db, ObjectTable):
        return manifest.items.db
    return None


def _kind_of(manifest: ManifestPort | str | None) -> str:
    """Where a saver's manifest lives: as named, or as the manifest given is built."""
    if isinstance(manifest, str):
        return manifest
    return "dynamodb" if _object_table_of(manifest) is None else "s3"


def _positive_minutes(minutes: float) -> float:
    """``sweep_interval_minutes``, refused unless it is positive."""
    if not minutes > 0:
        raise InvalidRequestError(f"sweep_interval_minutes must be positive, got {minutes!r}")
    return minutes


def _ttl_seconds(ttl: float | timedelta | None) -> int | None:
    """``thread_ttl_days`` in whole seconds (None: threads never expire)."""
    if ttl is None:
        return None
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl) * 86400
    if isinstance(ttl, bool) or not seconds > 0:
        raise InvalidRequestError(
            f"thread_ttl_days must be positive (days, or a timedelta), got {ttl!r}; "
            "None keeps threads forever"
        )
    return max(1, round(seconds))


async def _one(thread: str, ns: str) -> Namespaces:
    yield thread, ns, None
