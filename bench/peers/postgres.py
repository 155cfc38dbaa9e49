"""langgraph-checkpoint-postgres 3.2.0: AsyncPostgresSaver on a local PostgreSQL.

Install (venv-a): pip install "langgraph-checkpoint-postgres==3.2.0" "psycopg[binary,pool]"
compare.py starts the server (Debian's ``postgresql`` package) and a relay that adds
1 ms each way, and passes the relay's DSN in ``LGS3_BENCH_POSTGRES``; the endpoint
argument (moto's) is not used. Each run gets a database of its own, named after its
bucket.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

LABEL = "langgraph-checkpoint-postgres 3.2.0 (AsyncPostgresSaver)"
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")


def _dsn(database: str) -> str:
    base = os.environ["LGS3_BENCH_POSTGRES"]
    return base.rsplit("/", 1)[0] + "/" + database


@contextlib.asynccontextmanager
async def make(endpoint_url: Any, names: dict[str, str]) -> AsyncIterator[AsyncPostgresSaver]:
    database = names["bucket"].replace("-", "_")
    async with await psycopg.AsyncConnection.connect(_dsn("postgres"), autocommit=True) as c:
        await c.execute(f'CREATE DATABASE "{database}"')
    async with AsyncPostgresSaver.from_conn_string(_dsn(database)) as saver:
        await saver.setup()
        yield saver


async def stored(saver: AsyncPostgresSaver) -> int:
    """Bytes of the saver's tables, indexes and TOAST included."""
    async with saver.lock, saver.conn.cursor() as cur:  # rows are dicts (dict_row)
        await cur.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS size "
            "FROM pg_class c WHERE c.relname = ANY(%s) AND c.relkind = 'r'",
            (list(TABLES),),
        )
        row: Any = await cur.fetchone()
    return int(row["size"])
