"""What the saver and the store are both built on, made one way: the bucket checked,
the key layout, the clients with their limits, the object store, the loop the sync
twins run on and the TTL sweeper. No request is made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph_s3.aws.clients import ClientFactory, Limits
from langgraph_s3.aws.config import check_bucket_name
from langgraph_s3.aws.s3 import ObjectStore
from langgraph_s3.core.keys import Layout
from langgraph_s3.core.ports import ObjectStorePort
from langgraph_s3.runtime.periodic import PeriodicSweep
from langgraph_s3.runtime.runner import BackgroundLoop


@dataclass(frozen=True)
class Foundation:
    """The parts a saver and a store share in kind (each has its own)."""

    layout: Layout
    clients: ClientFactory
    objects: ObjectStorePort
    runner: BackgroundLoop
    sweeper: PeriodicSweep


def foundation(
    *,
    bucket: str,
    prefix: str,
    endpoint_url: str | None,
    region: str | None,
    session: Any,
    concurrency: int,
    cache_bytes: int,
    limits: Limits,
    objects: ObjectStorePort | None = None,
) -> Foundation:
    """The foundation of one saver or store on ``bucket`` under ``prefix``: its clients
    keep twice ``concurrency`` connections (at least 10); ``objects`` stands in for
    the S3 object store (tests).

    Raises:
        InvalidIdError: the bucket's name is not one S3 accepts.
    """
    check_bucket_name(bucket)
    clients = ClientFactory(
        session=session,
        endpoint_url=endpoint_url,
        region=region,
        max_connections=max(concurrency * 2, 10),
        limits=limits,
    )
    store = objects or ObjectStore(
        clients, bucket, concurrency=concurrency, cache_bytes=cache_bytes
    )
    return Foundation(
        Layout(prefix), clients, store, BackgroundLoop(clients.aclose_running), PeriodicSweep()
    )
