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
from .sync import S3Saver

__all__ = [
    "AsyncS3Saver",
    "CheckpointConflictError",
    "ConfigurationError",
    "InvalidIdError",
    "MissingResourceError",
    "RequestStats",
    "S3PersistenceError",
    "S3Saver",
]
