"""LangGraph persistence on AWS object storage.

The public names load on first use (PEP 562): ``import langgraph_s3`` alone, and the
command line's ``--help``, import no SDK and no LangGraph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph_s3.aws.clients import Limits
    from langgraph_s3.aws.stats import RequestStats
    from langgraph_s3.checkpoint.saver import AsyncS3Saver
    from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
    from langgraph_s3.core.records import ThreadInfo
    from langgraph_s3.core.report import Progress, Report
    from langgraph_s3.core.subject_policy import SubjectPolicy
    from langgraph_s3.errors import (
        AccessDeniedError,
        CheckpointConflictError,
        ClockSkewError,
        ClosedError,
        ConditionsIgnoredError,
        ConfigurationError,
        ConflictError,
        CorruptExportError,
        CorruptObjectError,
        EndpointTimeoutError,
        EndpointUnreachableError,
        InvalidIdError,
        InvalidRequestError,
        MissingResourceError,
        NewerFormatError,
        S3PersistenceError,
        SealBrokenError,
        ServiceError,
        SubjectForgottenError,
        ThreadExistsError,
    )
    from langgraph_s3.store.facade import AsyncS3Store
    from langgraph_s3.sync import S3Saver, S3Store

_EXPORTS = {
    "AccessDeniedError": "langgraph_s3.errors",
    "AsyncS3Saver": "langgraph_s3.checkpoint.saver",
    "AsyncS3Store": "langgraph_s3.store.facade",
    "CheckpointConflictError": "langgraph_s3.errors",
    "ClockSkewError": "langgraph_s3.errors",
    "ClosedError": "langgraph_s3.errors",
    "ConditionsIgnoredError": "langgraph_s3.errors",
    "ConfigurationError": "langgraph_s3.errors",
    "ConflictError": "langgraph_s3.errors",
    "CorruptExportError": "langgraph_s3.errors",
    "CorruptObjectError": "langgraph_s3.errors",
    "EndpointTimeoutError": "langgraph_s3.errors",
    "EndpointUnreachableError": "langgraph_s3.errors",
    "InvalidIdError": "langgraph_s3.errors",
    "InvalidRequestError": "langgraph_s3.errors",
    "Limits": "langgraph_s3.aws.clients",
    "ManifestPort": "langgraph_s3.core.ports",
    "MissingResourceError": "langgraph_s3.errors",
    "NewerFormatError": "langgraph_s3.errors",
    "ObjectStorePort": "langgraph_s3.core.ports",
    "Progress": "langgraph_s3.core.report",
    "Report": "langgraph_s3.core.report",
    "RequestStats": "langgraph_s3.aws.stats",
    "S3PersistenceError": "langgraph_s3.errors",
    "S3Saver": "langgraph_s3.sync",
    "S3Store": "langgraph_s3.sync",
    "SealBrokenError": "langgraph_s3.errors",
    "ServiceError": "langgraph_s3.errors",
    "SubjectForgottenError": "langgraph_s3.errors",
    "SubjectPolicy": "langgraph_s3.core.subject_policy",
    "ThreadExistsError": "langgraph_s3.errors",
    "ThreadInfo": "langgraph_s3.core.records",
}
"""Each public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:  # a subpackage (langgraph_s3.errors, .testing...), as before
        try:
            return importlib.import_module(f"langgraph_s3.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"langgraph_s3.{name}":
                raise  # the subpackage exists; something it imports does not
            raise AttributeError(f"module 'langgraph_s3' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "AccessDeniedError",
    "AsyncS3Saver",
    "AsyncS3Store",
    "CheckpointConflictError",
    "ClockSkewError",
    "ClosedError",
    "ConditionsIgnoredError",
    "ConfigurationError",
    "ConflictError",
    "CorruptExportError",
    "CorruptObjectError",
    "EndpointTimeoutError",
    "EndpointUnreachableError",
    "InvalidIdError",
    "InvalidRequestError",
    "Limits",
    "ManifestPort",
    "MissingResourceError",
    "NewerFormatError",
    "ObjectStorePort",
    "Progress",
    "Report",
    "RequestStats",
    "S3PersistenceError",
    "S3Saver",
    "S3Store",
    "SealBrokenError",
    "ServiceError",
    "SubjectForgottenError",
    "SubjectPolicy",
    "ThreadExistsError",
    "ThreadInfo",
]
