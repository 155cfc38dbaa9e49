"""Our own exception types: each message says what went wrong and what to do."""

from __future__ import annotations


class S3PersistenceError(Exception):
    """Base class for every error raised by langgraph-s3."""


class InvalidIdError(S3PersistenceError, ValueError):
    """A thread id, namespace, checkpoint id or other key part cannot be stored."""


class ConfigurationError(S3PersistenceError, ValueError):
    """A connection string or constructor argument is malformed."""


class MissingResourceError(S3PersistenceError):
    """The bucket or the manifest table does not exist."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(
            f"the {kind} {name!r} does not exist: call setup() or apply the "
            "terraform module in terraform/ to create it"
        )
        self.kind = kind
        self.name = name


class CheckpointConflictError(S3PersistenceError):
    """A checkpoint id was stored twice with different content."""
