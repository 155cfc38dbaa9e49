"""Offline testing helpers: a moto server on loopback, and pytest fixtures.

Installed as a pytest plugin (entry point ``langgraph_s3``), so a project that
depends on ``langgraph-s3[testing]`` gets these fixtures without a conftest:

* ``s3_endpoint``: URL of a moto server started once per session (or of the
  endpoint in ``AWS_ENDPOINT_URL`` when set, for running against real AWS or
  another implementation), strict (``moto_server(strict=True)``: it answers as
  AWS does where moto alone does not) unless the ini option
  ``langgraph_s3_strict = false`` says otherwise;
* ``s3_fresh``: the same endpoint, wiped before the test (moto only);
* ``s3_saver`` (alias ``async_s3_saver``) / ``s3_saver_sync``: a ready
  :class:`~langgraph_s3.AsyncS3Saver` / :class:`~langgraph_s3.S3Saver` on fresh state;
* ``async_s3_store`` / ``s3_store``: a ready :class:`~langgraph_s3.AsyncS3Store` /
  :class:`~langgraph_s3.S3Store` on a new bucket.

It also makes plain ``async def`` tests and fixtures work with no configuration:
unless the project sets ``asyncio_mode`` (ini option or ``--asyncio-mode``),
pytest-asyncio runs in ``auto`` mode; unless it sets
``asyncio_default_fixture_loop_scope``, that is ``function``.

Nothing here imports moto until a server is actually started.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from langgraph_s3.testing.moto import MotoServer, endpoint_or_moto, unique_names

if TYPE_CHECKING:
    from langgraph_s3.checkpoint.saver import AsyncS3Saver
    from langgraph_s3.store.facade import AsyncS3Store
    from langgraph_s3.sync import S3Saver, S3Store

__all__: list[str] = []  # hooks and fixtures only: the helpers are the package's


# ------------------------------------------------------- pytest-asyncio defaults
def _ini_is_set(config: pytest.Config, name: str) -> bool:
    """Whether the user gave ini option ``name`` in a config file or with ``-o``.

    ``getini`` cannot tell: it returns the registered default when unset, and
    ``asyncio_mode = "strict"`` written out equals that default.
    """
    # ``-o NAME=VALUE``: pytest 8 keeps these out of ``inicfg``
    for override in config.getoption("override_ini", None) or ():
        if str(override).partition("=")[0].strip() == name:
            return True
    # the config file's values: ``_inicfg`` in pytest 9, ``inicfg`` in pytest 8 (deprecated
    # in 9, hence read only when ``_inicfg`` is absent)
    inicfg = getattr(config, "_inicfg", None)
    if inicfg is None:
        inicfg = getattr(config, "inicfg", {})
    return name in inicfg


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "langgraph_s3_strict",
        "whether the s3_endpoint fixture's moto server answers as AWS does where moto "
        "alone does not (langgraph_s3.local.moto_server(strict=...))",
        type="bool",
        default=True,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Default pytest-asyncio to auto mode and function-scoped fixture loops.

    Without this, a project that only installs ``langgraph-s3[testing]`` fails every
    ``async def`` test ("not natively supported"): pytest-asyncio's default is
    ``strict``. Only unset settings are filled in; an explicit one always wins.

    ``tryfirst``: pytest-asyncio's own ``pytest_configure`` (a plain hook) reads
    ``asyncio_default_fixture_loop_scope`` and warns when it is unset, and entry-point
    plugins register in no fixed order, so only ``tryfirst`` puts us before it. The
    mode is read later (collection, fixture setup): ``--asyncio-mode`` first, then the
    ini option, so setting what ``--asyncio-mode`` would have set suffices.
    """
    _project_importable(config)
    if not hasattr(config.option, "asyncio_mode"):
        return  # pytest-asyncio is not loaded (not installed, or ``-p no:asyncio``)
    if config.getoption("asyncio_mode") is None and not _ini_is_set(config, "asyncio_mode"):
        config.option.asyncio_mode = "auto"
    scope = "asyncio_default_fixture_loop_scope"
    inicache = getattr(config, "_inicache", None)
    if isinstance(inicache, dict) and not _ini_is_set(config, scope):
        # No public setter for an ini value; getini answers from this cache.
        # "function": pytest-asyncio's announced default, and the loop tests run in.
        inicache[scope] = "function"


def _project_importable(config: pytest.Config) -> None:
    """The project's root on ``sys.path`` when its configuration sets no
    ``pythonpath``: ``pytest`` then imports the project's own modules (``my_agent``) as
    ``python -m pytest`` does, instead of failing every test module at collection."""
    if _ini_is_set(config, "pythonpath"):
        return
    root = str(config.rootpath)
    if root not in sys.path:
        sys.path.append(root)  # after what is installed: it completes, never shadows


# --------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def s3_endpoint(pytestconfig: pytest.Config) -> Iterator[MotoServer]:
    """One S3/DynamoDB endpoint for the whole test session: strict unless the ini
    option ``langgraph_s3_strict`` is false."""
    strict = bool(pytestconfig.getini("langgraph_s3_strict"))
    with endpoint_or_moto(strict=strict) as server:
        yield server


@pytest.fixture
def s3_fresh(s3_endpoint: MotoServer) -> MotoServer:
    """The endpoint, wiped before the test when it is our own moto server."""
    s3_endpoint.reset()
    return s3_endpoint


@pytest.fixture
def s3_saver_sync(s3_fresh: MotoServer) -> Iterator[S3Saver]:
    """A set-up :class:`~langgraph_s3.S3Saver` on a new bucket and table."""
    from langgraph_s3.sync import S3Saver

    with S3Saver(endpoint_url=s3_fresh.url, **unique_names()) as saver:
        saver.setup()
        yield saver


@pytest.fixture
def s3_store(s3_fresh: MotoServer) -> Iterator[S3Store]:
    """A set-up :class:`~langgraph_s3.S3Store` on a new bucket (a store needs no table)."""
    from langgraph_s3.sync import S3Store

    bucket = unique_names()["bucket"]
    with S3Store(bucket=bucket, endpoint_url=s3_fresh.url) as store:
        store.setup()
        yield store


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the async fixtures need pytest-asyncio
    pass
else:
    # ``pytest_asyncio.fixture`` (not ``pytest.fixture``) so that they also work for
    # marked tests in strict mode.

    @pytest_asyncio.fixture
    async def s3_saver(s3_fresh: MotoServer) -> AsyncIterator[AsyncS3Saver]:
        """A set-up :class:`~langgraph_s3.AsyncS3Saver` on a new bucket and table."""
        from langgraph_s3.checkpoint.saver import AsyncS3Saver

        async with AsyncS3Saver(endpoint_url=s3_fresh.url, **unique_names()) as saver:
            await saver.setup()
            yield saver

    @pytest.fixture
    def async_s3_saver(s3_saver: AsyncS3Saver) -> AsyncS3Saver:
        """``s3_saver`` under the name that pairs with ``async_s3_store``."""
        return s3_saver

    @pytest_asyncio.fixture
    async def async_s3_store(s3_fresh: MotoServer) -> AsyncIterator[AsyncS3Store]:
        """A set-up :class:`~langgraph_s3.AsyncS3Store` on a new bucket (no table needed)."""
        from langgraph_s3.store.facade import AsyncS3Store

        bucket = unique_names()["bucket"]
        async with AsyncS3Store(bucket=bucket, endpoint_url=s3_fresh.url) as store:
            await store.setup()
            yield store
