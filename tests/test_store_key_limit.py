"""The store refuses, before any request, an item whose S3 key would pass S3's 1,024
bytes: labels are bounded one by one, their number is not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp

from langgraph_s3 import AsyncS3Store
from langgraph_s3.core.keys import MAX_KEY_BYTES
from langgraph_s3.errors import InvalidIdError
from langgraph_s3.testing import MotoServer, unique_names

DEEP = tuple(f"{i}" + "x" * 119 for i in range(8))  # 8 labels of 120 characters
LONG_KEY = "k" * 120


@pytest.fixture
async def store(s3_fresh: MotoServer) -> AsyncIterator[AsyncS3Store]:
    async with AsyncS3Store(
        endpoint_url=s3_fresh.url, bucket=unique_names()["bucket"], prefix="mem"
    ) as s:
        await s.setup()
        yield s


def test_the_deepest_namespace_that_fits_and_the_first_that_does_not() -> None:
    from langgraph_s3.core.keys import Layout

    layout = Layout("mem")
    fits = layout.store_item(DEEP[:7], LONG_KEY)
    assert len(fits.encode()) <= MAX_KEY_BYTES
    with pytest.raises(InvalidIdError, match=r"1,\d{3} bytes; S3 allows 1,024"):
        layout.store_item(DEEP, LONG_KEY)
    # escaped characters count as what they become: 40 "é" are 240 bytes, hashed to 66
    assert len(layout.store_item(DEEP[:7], "é" * 40)) < len(fits)


async def test_a_batch_holding_one_key_too_long_writes_nothing(store: AsyncS3Store) -> None:
    good = [PutOp(("a",), "1", {"v": 1}), PutOp(("b",), "2", {"v": 2})]
    bad = PutOp(DEEP, LONG_KEY, {"v": 3})
    with pytest.raises(InvalidIdError, match="use fewer or shorter namespace labels"):
        await store.abatch([good[0], bad, good[1]])
    assert await store.abatch([GetOp(("a",), "1"), GetOp(("b",), "2")]) == [None, None]
    assert await store.asearch(()) == []
    # the good ones alone are fine, and so is the deepest namespace that fits
    await store.abatch([*good, PutOp(DEEP[:7], LONG_KEY, {"v": 4})])
    item = await store.aget(DEEP[:7], LONG_KEY)
    assert item is not None and item.value == {"v": 4}
    assert len(await store.asearch(())) == 3


async def test_reads_of_a_key_too_long_are_refused_alike(store: AsyncS3Store) -> None:
    with pytest.raises(InvalidIdError):
        await store.aget(DEEP, LONG_KEY)
    with pytest.raises(InvalidIdError):
        await store.adelete(DEEP, LONG_KEY)
    with pytest.raises(InvalidIdError):
        await store.abatch([SearchOp(("a",)), GetOp(DEEP, LONG_KEY)])
