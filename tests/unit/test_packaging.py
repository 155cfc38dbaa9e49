"""``langgraph-s3 lambda build``'s refusals (all before pip runs), its zip's bytes and
bytecode, and loading a graph by file: pure logic on temporary folders."""

from __future__ import annotations

import marshal
import sys
from pathlib import Path

import pytest

from langgraph_s3.ops.deploy.packaging import (
    BuildError,
    Built,
    Target,
    _compile,
    _image,
    _zip,
    build,
)
from langgraph_s3.ops.handlers.lambda_app import load_graph
from langgraph_s3.ops.tools.cli.base import printable

GRAPH = "from langgraph_s3.testing.graphs import chat_graph\ngraph = chat_graph()\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(GRAPH)
    return tmp_path


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"python": "3.10"}, "python3.11 or later"),
        ({"python": "three"}, "python3.11 or later"),
        ({"arch": "sparc"}, "one of x86_64, arm64"),
        ({"include": [Path("missing.txt")]}, "no such file"),
        ({"requirements": Path("missing.txt")}, "no such requirements file"),
    ],
)
def test_a_bad_build_is_refused_before_pip(
    project: Path, kwargs: dict[str, object], said: str
) -> None:
    with pytest.raises(BuildError, match=said):
        build("agent.py:graph", project / "out.zip", root=project, **kwargs)  # type: ignore[arg-type]
    assert not (project / "out.zip").exists()


@pytest.mark.parametrize("name", ["json.py", "langgraph.py", "langgraph_s3_handler.py"])
def test_a_file_named_like_a_module_python_needs_is_refused(project: Path, name: str) -> None:
    (project / name).write_text(GRAPH)
    with pytest.raises(BuildError, match="rename it"):
        build(f"{name}:graph", project / "out.zip", root=project)
    with pytest.raises(BuildError, match="rename it"):  # and as an --include
        build("agent.py:graph", project / "out.zip", root=project, include=[Path(name)])


def test_outputs_that_cannot_be_written_are_refused(project: Path) -> None:
    (project / "folder.zip").mkdir()
    with pytest.raises(BuildError, match="is a folder"):
        build("agent.py:graph", project / "folder.zip", root=project)
    (project / "taken").mkdir()
    (project / "taken" / "x").write_text("")
    with pytest.raises(BuildError, match="give a new folder"):
        build("agent.py:graph", project / "taken", root=project, image=True)
    (project / "afile").write_text("")
    with pytest.raises(BuildError, match="give a new folder"):
        build("agent.py:graph", project / "afile", root=project, image=True)


def test_the_same_files_make_the_same_zip(tmp_path: Path) -> None:
    app = tmp_path / "app"
    (app / "pkg").mkdir(parents=True)
    (app / "pkg" / "mod.py").write_text("X = 1\n")
    (app / "run.sh").write_text("#!/bin/sh\n")
    (app / "run.sh").chmod(0o755)
    files = sorted(p for p in app.rglob("*") if p.is_file())
    first = _zip(app, files, tmp_path / "a.zip")
    (app / "pkg" / "mod.py").touch()  # a new mtime: the bytes do not change
    _zip(app, files, tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    assert first == (tmp_path / "a.zip").stat().st_size
    assert not list(tmp_path.glob("*.part"))


def test_bytecode_names_lambdas_paths_and_only_for_this_python(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "mod.py").write_text("def f():\n    return 1\n")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    built = Built(tmp_path / "x.zip", "h")
    _compile(app, Target(tmp_path / "x.zip", python=here), built)
    (pyc,) = (app / "__pycache__").glob("mod.*.pyc")
    code = marshal.loads(pyc.read_bytes()[16:])
    assert code.co_filename == "/var/task/mod.py" and not built.notes
    other = "3.99" if here != "3.99" else "3.98"
    app2 = tmp_path / "app2"
    app2.mkdir()
    (app2 / "mod.py").write_text("X = 1\n")
    _compile(app2, Target(tmp_path / "x.zip", python=other), built)
    assert not (app2 / "__pycache__").exists() and "no bytecode" in built.notes[0]


def test_a_graph_file_named_like_a_module_python_has_is_refused(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text(GRAPH)
    with pytest.raises(ValueError, match="rename it"):
        load_graph("json.py:graph", root=str(tmp_path))
    (tmp_path / "broken_agent.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(RuntimeError):
        load_graph("broken_agent.py:graph", root=str(tmp_path))
    assert "broken_agent" not in sys.modules  # a failed import leaves nothing behind


def test_ids_are_shown_without_control_characters() -> None:
    assert printable("chat-42") == "chat-42"
    assert printable("\x1b]0;pwned\x07x") == "\\x1b]0;pwned\\x07x"


def test_an_image_is_its_folder_and_a_dockerfile_on_lambdas_base_image(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "agent.py").write_text(GRAPH)
    built = _image(app, tmp_path / "img", Built(tmp_path / "img", "h"), "3.12", "arm64")
    dockerfile = (tmp_path / "img" / "Dockerfile").read_text()
    assert "FROM public.ecr.aws/lambda/python:3.12" in dockerfile
    assert 'CMD ["langgraph_s3_handler.handler"]' in dockerfile
    assert "linux/arm64" in dockerfile and "linux/arm64" in built.notes[0]
    assert (tmp_path / "img" / "app" / "agent.py").read_text() == GRAPH
    assert built.path == tmp_path / "img"


def test_pips_download_sizes_are_read_from_its_lines() -> None:
    from langgraph_s3.ops.deploy.packaging import _megabytes

    assert _megabytes("Downloading langgraph-1.2.3-py3-none-any.whl (152 kB)") == 0.152
    assert _megabytes("Downloading botocore-1.40.0-py3-none-any.whl (13.6 MB)") == 13.6
    assert _megabytes("Downloading huge.whl (1.5 GB)") == 1500.0
    assert _megabytes("Downloading odd.whl") == 0.0 and _megabytes("Downloading x (n/a MB)") == 0.0
