"""Build the Lambda deployment zip: langgraph-s3 and its dependencies for
Linux x86_64 / Python 3.11, the handler, and compiled bytecode (no .py
compilation at cold start).

    python examples/lambda/build_zip.py [--out dist/lambda.zip] [--keep-dir DIR]
"""

from __future__ import annotations

import argparse
import compileall
import py_compile
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent.parent
# not needed on Lambda: the test server, the test runner, the CLI's extras
DROP = ("moto", "pytest", "_pytest", "pip", "setuptools", "wheel", "boto3", "s3transfer")


def _clean_source() -> Path:
    """The project's sources alone, in a new folder: pip builds the wheel from them, so
    a stale ``build/`` of the checkout (an earlier layout's modules) never ships."""
    copy = Path(tempfile.mkdtemp(prefix="lgs3-src-")) / "project"
    shutil.copytree(
        PROJECT / "src",
        copy / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"),
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (PROJECT / name).exists():
            shutil.copy(PROJECT / name, copy / name)
    return copy


def build(out: Path, keep_dir: Path | None = None) -> Path:
    work = keep_dir or Path(tempfile.mkdtemp(prefix="lgs3-lambda-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    source = _clean_source()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--target",
            str(work),
            "--platform",
            "manylinux2014_x86_64",
            "--implementation",
            "cp",
            "--python-version",
            "3.11",
            "--only-binary=:all:",
            f"{source}[lambda]",
        ],
        check=True,
    )
    shutil.rmtree(source.parent, ignore_errors=True)
    for name in DROP:
        for path in work.glob(f"{name}*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    shutil.copy(HERE / "handler.py", work / "handler.py")
    # unchecked hash-based pycs: trusted without comparing source mtimes (zip
    # rounds them), so a cold start never recompiles, and Lambda's read-only
    # filesystem could not save a recompiled file anyway
    compileall.compile_dir(
        work,
        quiet=1,
        force=True,
        workers=0,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(work.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(work))
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROJECT / "dist" / "lambda.zip")
    parser.add_argument("--keep-dir", type=Path, default=None)
    args = parser.parse_args()
    path = build(args.out, args.keep_dir)
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
