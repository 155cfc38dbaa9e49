"""Test machinery, imported by no runtime module: the pytest plugin (this package, entry
point ``langgraph_s3``: its fixtures and hooks come from :mod:`.plugin`), the in-memory
fakes and fault wrappers (:mod:`.fakes`), the moto helpers (:mod:`.moto`) and the sample
graphs (:mod:`.graphs`).

``from langgraph_s3.testing import MotoServer, unique_names`` works without pytest; the
fixtures are here only when pytest is running (it imports this package as its plugin),
so importing the fakes or the sample graphs never imports pytest.
"""

from __future__ import annotations

import sys

from langgraph_s3.testing.moto import (
    BENCH_LATENCY,
    ConflictPlan,
    Latency,
    MotoServer,
    Names,
    ServedRequest,
    critical_path,
    endpoint_or_moto,
    free_port,
    kms_etag,
    moto_server,
    unique_names,
    use_dummy_credentials,
)

__all__ = [
    "BENCH_LATENCY",
    "ConflictPlan",
    "Latency",
    "MotoServer",
    "Names",
    "ServedRequest",
    "critical_path",
    "endpoint_or_moto",
    "free_port",
    "kms_etag",
    "moto_server",
    "unique_names",
    "use_dummy_credentials",
]

PLUGIN = (
    "pytest_addoption",
    "pytest_configure",
    "s3_endpoint",
    "s3_fresh",
    "s3_saver_sync",
    "s3_store",
    "s3_saver",
    "async_s3_saver",
    "async_s3_store",
)
"""The pytest plugin's hooks and fixtures (:mod:`.plugin`; the async fixtures where
pytest-asyncio is installed), copied here: the entry point names this package."""

if "pytest" in sys.modules:  # pytest loads the plugin: nothing imports pytest otherwise
    from langgraph_s3.testing import plugin as _plugin

    globals().update({name: getattr(_plugin, name) for name in PLUGIN if hasattr(_plugin, name)})
