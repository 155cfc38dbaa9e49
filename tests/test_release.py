"""The release as an index would take it: an sdist and a wheel built with ``python -m
build`` (the wheel from the sdist), passing ``twine check``, carrying the license, the
changelog and the terraform module; the wheel installed in a fresh venv runs a chat turn on
a moto server and writes the module into a project."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[1]
MODULE = [
    "ops/deploy/terraform/main.tf",
    "ops/deploy/terraform/variables.tf",
    "ops/deploy/terraform/outputs.tf",
    "ops/deploy/terraform/versions.tf",
    "ops/deploy/terraform/examples/lambda/main.tf",
]
TURN = """
import json
from langgraph_s3 import S3Saver
from langgraph_s3.testing.graphs import chat_graph
from langgraph_s3.testing.moto import moto_server, unique_names, use_dummy_credentials

use_dummy_credentials()
with moto_server() as server:
    with S3Saver(endpoint_url=server.url, **unique_names()) as saver:
        saver.setup()
        graph = chat_graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        out = graph.invoke({"messages": [("user", "What's the weather?")]}, config)
        again = graph.get_state(config).values["messages"]
        print(json.dumps({"messages": len(out["messages"]), "stored": len(again)}))
"""


def sh(*args: str | Path, cwd: Path | None = None, timeout: int = 600) -> str:
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{args}: {proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_the_built_release_passes_twine_and_its_wheel_runs_a_turn_from_a_fresh_venv(
    tmp_path: Path,
) -> None:
    dist = tmp_path / "dist"
    sh(sys.executable, "-m", "build", "--outdir", dist, ROOT, timeout=900)
    (sdist,) = dist.glob("langgraph_s3-*.tar.gz")
    (wheel,) = dist.glob("langgraph_s3-*-py3-none-any.whl")
    assert "PASSED" in sh(sys.executable, "-m", "twine", "check", "--strict", sdist, wheel)

    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
    assert {f"{top}/LICENSE", f"{top}/CHANGELOG.md", f"{top}/README.md"} <= names
    assert {f"{top}/src/langgraph_s3/{m}" for m in MODULE} <= names
    with zipfile.ZipFile(wheel) as whl:
        files = set(whl.namelist())
        info = wheel.name.removesuffix("-py3-none-any.whl")
        metadata = whl.read(f"{info}.dist-info/METADATA").decode()
    assert {f"langgraph_s3/{m}" for m in MODULE} <= files
    assert "langgraph_s3/py.typed" in files and f"{info}.dist-info/licenses/LICENSE" in files
    assert "License-Expression: MIT" in metadata
    assert "Classifier: Typing :: Typed" in metadata and "Requires-Python: >=3.11" in metadata

    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    sh(python, "-m", "pip", "install", "-q", f"{wheel}[demo]", timeout=900)
    turn = json.loads(sh(python, "-c", TURN, cwd=tmp_path).strip().splitlines()[-1])
    assert turn == {"messages": 4, "stored": 4}, turn  # question, tool call, tool, answer
    project = tmp_path / "project"
    project.mkdir()
    wrote = sh(venv / "bin" / "langgraph-s3", "lambda", "terraform", cwd=project)
    assert "wrote terraform/main.tf" in wrote
    assert (project / "terraform" / "modules" / "langgraph-s3" / "main.tf").read_text() == (
        ROOT / "terraform" / "main.tf"
    ).read_text()
