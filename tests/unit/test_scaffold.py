"""``lambda terraform`` (``ops/deploy/scaffold.py``): the packaged module and root,
written into a project with the module's source and the zip's path made its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from langgraph_s3.ops.deploy.scaffold import MODULE_FILES, ScaffoldError, write_terraform

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_the_root_points_at_the_module_beside_it_and_at_the_zip(tmp_path: Path) -> None:
    project = tmp_path / "project"
    written = write_terraform(project / "infra" / "tf", project / "build" / "agent.zip")
    root = written.root.read_text()
    assert re.search(r'\bsource\s*=\s*"\./modules/langgraph-s3"', root)
    assert re.search(r'\bdefault\s*=\s*"\.\./\.\./build/agent\.zip"', root)
    assert '"../.."' not in root and 'dist/lambda.zip"' not in root.split("variable")[-1]
    for name in MODULE_FILES:  # the module as the repository's terraform/ holds it
        assert (written.module / name).read_text() == (REPO / "terraform" / name).read_text()
    assert sorted(p.name for p in written.files) == sorted([*MODULE_FILES, "main.tf"])


def test_a_root_there_already_is_kept_unless_forced(tmp_path: Path) -> None:
    first = write_terraform(tmp_path / "tf", tmp_path / "dist" / "lambda.zip")
    first.root.write_text("# my edits\n")
    with pytest.raises(ScaffoldError, match="--force"):
        write_terraform(tmp_path / "tf", tmp_path / "dist" / "lambda.zip")
    assert first.root.read_text() == "# my edits\n"
    again = write_terraform(tmp_path / "tf", tmp_path / "other.zip", force=True)
    assert '"../other.zip"' in again.root.read_text()


def test_a_zip_path_is_written_as_a_terraform_string(tmp_path: Path) -> None:
    odd = tmp_path / 'we"ird ${x} %{y}' / "a.zip"
    root = write_terraform(tmp_path / "tf", odd).root.read_text()
    assert 'default     = "../we\\"ird $${x} %%{y}/a.zip"' in root
    with pytest.raises(ScaffoldError, match="control character"):
        write_terraform(tmp_path / "tf2", tmp_path / "a\nb.zip")


def test_a_file_or_folder_in_the_way_is_said(tmp_path: Path) -> None:
    (tmp_path / "a" / "main.tf").mkdir(parents=True)
    with pytest.raises(ScaffoldError, match="should be a file"):
        write_terraform(tmp_path / "a", tmp_path / "x.zip", force=True)
    (tmp_path / "b" / "modules").mkdir(parents=True)
    (tmp_path / "b" / "modules" / "langgraph-s3").write_text("not a folder")
    with pytest.raises(ScaffoldError, match="should be a folder"):
        write_terraform(tmp_path / "b", tmp_path / "x.zip")
