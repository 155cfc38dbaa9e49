"""LangGraph persistence on AWS object storage."""

from .clients import RequestStats
from .errors import (
    CheckpointConflictError,
    ConfigurationError,
    InvalidIdError,
    MissingResourceError,
    S3PersistenceError,
)
from .saver import AsyncS3Saver
from .store import AsyncS3Store
from .sync import S3Saver, S3Store

__all__ = [
    "AsyncS3Saver",
    "AsyncS3Store",
    "CheckpointConflictError",
    "ConfigurationError",
    "InvalidIdError",
    "MissingResourceError",
    "RequestStats",
    "S3PersistenceError",
    "S3Saver",
    "S3Store",
]
