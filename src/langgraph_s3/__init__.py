"""LangGraph persistence on AWS object storage."""

from .errors import (
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
    ServiceError,
    ThreadExistsError,
)
from .records import ThreadInfo
from .report import Report
from .saver import AsyncS3Saver
from .stats import RequestStats
from .store import AsyncS3Store
from .sync import S3Saver, S3Store

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
    "MissingResourceError",
    "NewerFormatError",
    "Report",
    "RequestStats",
    "S3PersistenceError",
    "S3Saver",
    "S3Store",
    "ServiceError",
    "ThreadExistsError",
    "ThreadInfo",
]
