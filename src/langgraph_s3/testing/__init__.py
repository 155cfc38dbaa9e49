"""Test machinery, imported by no runtime module: the pytest plugin (this package, entry
point ``langgraph_s3``: its fixtures and hooks come from :mod:`.plugin`), the in-memory
fakes and fault wrappers (:mod:`.fakes`), the moto helpers (:mod:`.moto`) and the sample
graphs (:mod:`.graphs`).

``from langgraph_s3.testing import MotoServer, unique_names`` works without pytest; the
fixtures are here only where pytest is installed.
"""

from __future__ import annotations

import importlib.util

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

if importlib.util.find_spec("pytest") is not None:  # the plugin: its hooks and fixtures
    from langgraph_s3.testing import plugin as _plugin

    globals().update(
        {
            name: value
            for name, value in vars(_plugin).items()
            if name.startswith(("pytest_", "s3_", "async_s3_"))
        }
    )
