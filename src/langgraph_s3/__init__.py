"""LangGraph persistence on AWS object storage."""

from langgraph_s3.aws.clients import Limits
from langgraph_s3.aws.stats import RequestStats
from langgraph_s3.checkpoint.saver import AsyncS3Saver
from langgraph_s3.core.ports import ManifestPort, ObjectStorePort
from langgraph_s3.core.records import ThreadInfo
from langgraph_s3.core.report import Progress, Report
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
    ServiceError,
    ThreadExistsError,
)
from langgraph_s3.store.facade import AsyncS3Store
from langgraph_s3.sync import S3Saver, S3Store

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
    "ServiceError",
    "ThreadExistsError",
    "ThreadInfo",
]
