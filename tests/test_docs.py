"""The documentation: the site builds in strict mode (a broken link, a page left out of
the navigation or a docstring the reference cannot read fails it), the README's table
of contents points at pages that exist, and a broken link is caught."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_site_builds_strictly_with_every_page(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    nav = re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(nav) == pages
    for page in pages:  # each page rendered, the API reference from the docstrings
        assert (tmp_path / "site" / (page[:-3] if page != "index.md" else "")).exists()
    reference = (tmp_path / "site" / "reference" / "index.html").read_text()
    for name in (
        "AsyncS3Saver",
        "aget_thread",
        "AsyncS3Store",
        "LambdaApp",
        "MissingResourceError",
    ):
        assert name in reference, name


def test_the_readme_is_short_and_its_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 120  # a quick start and a table of contents
    links = re.findall(r"\]\((docs/[^)#]+)\)", readme)
    assert len(links) >= 10
    for link in links:
        assert (ROOT / link).exists(), link


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__"))
    page = copy / "docs" / "store.md"
    page.write_text(page.read_text() + "\nSee [the old page](no-such-page.md).\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr


@pytest.mark.parametrize("page", ["lambda.md", "operating.md"])
def test_pages_name_the_commands_they_document(page: str) -> None:
    text = (ROOT / "docs" / page).read_text()
    wanted = {
        "lambda.md": ["langgraph-s3 lambda build", "TF_CLI_CONFIG_FILE", "asyncio.Runner"],
        "operating.md": ["latest~", "--dry-run", "langgraph-s3 setup", "--strict"],
    }[page]
    for word in wanted:
        assert word in text, word
