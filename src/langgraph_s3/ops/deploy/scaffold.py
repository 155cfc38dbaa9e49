"""``langgraph-s3 lambda terraform``: the terraform module this package ships, and a
ready root that deploys the zip ``lambda build`` wrote, written into your project (no
clone of the repository, no registry: the module travels with the library's version).

The root is the repository's ``terraform/examples/lambda``: the module's bucket, table
and role, the function, its environment, its secrets by ARN and extra IAM statements;
its ``source`` points at the copy written beside it and ``zip_path`` at your zip.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

MODULE_FILES = ("main.tf", "variables.tf", "outputs.tf", "versions.tf")
MODULE_DIR = Path("modules") / "langgraph-s3"
"""Where the module goes, under the directory written."""
_SOURCE = re.compile(r'(\bsource\s*=\s*)"\.\./\.\."')
_ZIP = re.compile(r'(\bdefault\s*=\s*)"\.\./\.\./\.\./dist/lambda\.zip"')


class ScaffoldError(Exception):
    """The directory cannot be written as asked (a root is there already)."""


@dataclass(frozen=True)
class Written:
    """What :func:`write_terraform` wrote: the root, the module's folder, every file."""

    root: Path
    module: Path
    files: list[Path]


def _packaged(*parts: str) -> str:
    return resources.files("langgraph_s3.ops.deploy").joinpath("terraform", *parts).read_text()


def write_terraform(directory: Path, zip_path: Path, *, force: bool = False) -> Written:
    """Write the module into ``directory/modules/langgraph-s3`` and the Lambda root into
    ``directory/main.tf``, its ``zip_path`` defaulting to ``zip_path`` (relative to the
    root, as terraform reads it). A root already there is kept unless ``force``: it may
    hold your edits. No request; a few small files."""
    root = directory / "main.tf"
    module = directory / MODULE_DIR
    for path, kind in ((directory, "a folder"), (module, "a folder"), (root, "a file")):
        if path.exists() and path.is_dir() != (kind == "a folder"):
            raise ScaffoldError(f"{path} is in the way: it should be {kind}; move it")
    if root.exists() and not force:
        raise ScaffoldError(
            f"{root} exists: pass --force to write the root and the module over it "
            "(your edits to them go), or choose another directory"
        )
    template = _packaged("examples", "lambda", "main.tf")
    if any(ord(c) < 32 for c in str(zip_path)):
        raise ScaffoldError(f"{zip_path!r}: a zip path with a control character")
    try:
        relative = Path(os.path.relpath(zip_path.resolve(), directory.resolve())).as_posix()
    except ValueError:  # another drive (Windows): no relative path, the absolute one
        relative = zip_path.resolve().as_posix()
    text, sources = _SOURCE.subn(lambda m: f'{m[1]}"./{MODULE_DIR.as_posix()}"', template)
    text, zips = _ZIP.subn(lambda m: m[1] + _quoted(relative), text)
    if (sources, zips) != (1, 1):  # the example changed shape: say so, write nothing
        raise ScaffoldError("the packaged example root has no module source or zip default")
    module.mkdir(parents=True, exist_ok=True)
    files = []
    for name in MODULE_FILES:
        (module / name).write_text(_packaged(name))
        files.append(module / name)
    root.write_text(text)
    files.append(root)
    return Written(root=root, module=module, files=files)


def _quoted(text: str) -> str:
    """A terraform string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("${", "$${").replace("%{", "%%{")
    return f'"{escaped}"'
