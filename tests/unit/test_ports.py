"""The ports carry their contract: every method of the object store, manifest and table
interfaces says what a caller may rely on (the adapters say how they keep it)."""

from __future__ import annotations

import inspect

import pytest

from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.manifest.table import TablePort

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("port", [ObjectStorePort, ManifestPort, TablePort])
def test_every_port_method_documents_its_contract(port: type) -> None:
    undocumented = []
    for name, member in vars(port).items():
        if name.startswith("_"):
            continue
        target = member.fget if isinstance(member, property) else member
        if callable(target) and not (inspect.getdoc(target) or "").strip():
            undocumented.append(name)
    assert len([n for n in vars(port) if not n.startswith("_")]) >= 9
    assert undocumented == []
