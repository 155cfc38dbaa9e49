"""Our own exception types: each message says what went wrong and what to do.

Every failure a caller of the saver or the store sees is an
:class:`S3PersistenceError` (the original exception chained as ``__cause__``),
except LangGraph's own errors where LangGraph defines one
(``InvalidNamespaceError``, ``TypeError`` for values its serializer refuses).
AWS failures are translated in one place, ``aws/door.py``, from a table.
"""

from __future__ import annotations


class S3PersistenceError(Exception):
    """Base class for every error raised by langgraph-s3."""

    code: str = ""
    """The error code (or HTTP status) AWS answered with, when the error is its answer
    (``aws/door.py`` sets it); empty for what never reached AWS or was raised here."""


class InvalidIdError(S3PersistenceError, ValueError):
    """A thread id, namespace, checkpoint id or other key part cannot be stored.

    Raised before the first request, so nothing is ever half-written.
    """


class InvalidRequestError(S3PersistenceError, ValueError):
    """An argument of a call is malformed (a filter operator, a prune strategy, ...)."""


class ConfigurationError(S3PersistenceError, ValueError):
    """A connection string, constructor argument or credential setting is wrong."""


class MissingResourceError(S3PersistenceError):
    """The bucket or the manifest table does not exist."""

    def __init__(
        self,
        kind: str,
        name: str,
        *,
        fix: str = "call setup() or apply the terraform module in terraform/ to create it",
    ) -> None:
        super().__init__(f"the {kind} {name!r} does not exist: {fix}")
        self.kind = kind
        self.name = name


class AccessDeniedError(S3PersistenceError, PermissionError):
    """AWS refused a request: credentials, IAM policy or bucket policy."""


class EndpointUnreachableError(S3PersistenceError, ConnectionError):
    """No connection to the S3 or DynamoDB endpoint could be made or kept."""


class EndpointTimeoutError(EndpointUnreachableError, TimeoutError):
    """The endpoint did not answer within the configured limits."""


class ServiceError(S3PersistenceError):
    """AWS answered with an error we have no more specific type for
    (throttling that outlasted the retries, a 5xx, a request AWS rejected)."""

    def __init__(self, message: str, *, code: str = "", status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class CorruptObjectError(S3PersistenceError):
    """An object's bytes cannot be decoded: it is named, never served."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(
            f"object {key!r} is corrupt ({reason}); it was not written by this version of "
            "langgraph-s3 or was damaged: restore it from a bucket version, or delete the thread"
        )
        self.key = key


class NewerFormatError(CorruptObjectError):
    """An object in a format a newer langgraph-s3 wrote: nothing is damaged."""

    def __init__(self, key: str, found: object, known: object) -> None:
        S3PersistenceError.__init__(
            self,
            f"object {key!r} was written by a newer version of langgraph-s3 (format {found!r}; "
            f"this one reads up to {known}): upgrade this process; nothing is damaged, so do "
            "not delete or restore anything",
        )
        self.key = key


class SealBrokenError(CorruptObjectError):
    """A sealed object (a subject's, encrypted with its data key) failed its
    authentication: changed, truncated, moved from another key, or sealed with another
    key than the one named. Its plaintext is never returned."""

    def __init__(self, key: str, reason: str) -> None:
        S3PersistenceError.__init__(
            self,
            f"object {key!r} failed its authentication ({reason}); its content is not "
            "returned: restore it from a bucket version, or delete the thread",
        )
        self.key = key


class SubjectForgottenError(S3PersistenceError):
    """The subject is forgotten, or being forgotten: nothing is sealed for it any more,
    and what was sealed with a destroyed key is never read."""


class KeyUnavailableError(S3PersistenceError):
    """A subject's data key could not be made or unwrapped: the KMS key is disabled,
    pending deletion or missing, or refused this caller or this wrapped key."""


class ConflictError(S3PersistenceError):
    """Concurrent writers kept changing what this call had to change."""


class ConditionFailedError(ConflictError):
    """A conditional write lost (S3 412/409, DynamoDB ConditionalCheckFailed).

    Callers inside the library resolve it (read back and compare); it reaches
    users only wrapped in a more specific conflict.
    """


class TransactionFailedError(ConditionFailedError):
    """A table transaction's condition did not hold (DynamoDB's TransactionCanceled
    with ConditionalCheckFailed): nothing of it was written. ``failed``: the indexes
    of the parts whose condition failed, in the order they were given."""

    def __init__(self, message: str, failed: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.failed = failed


class RequestConflictError(ConditionFailedError):
    """S3 answered 409 ConditionalRequestConflict: another conditional write of the key
    was in progress. Nothing was written and no condition was evaluated: the request
    is sent again (``aws/s3.py``); one S3 keeps answering is resolved there (a lost
    condition, or a :class:`ConflictError`), never seen by users."""


class StaleBasisError(S3PersistenceError):
    """A create-only write of an object manifest's version was about to leave built on
    a read older than the fence allows (``core/fence.py``): not sent. The writer reads
    the item again and decides anew; never seen by users."""


class ConditionsIgnoredError(S3PersistenceError):
    """The S3 endpoint ignores a condition the library relies on (``If-None-Match`` /
    ``If-Match`` on PUT, ``If-Match`` on DELETE): found by ``setup()``'s probe."""

    FIX = (
        "use a store that honours conditional writes (Amazon S3, Cloudflare R2, Ceph RGW; "
        "Tigris with the header X-Tigris-Consistent: true)"
    )

    def __init__(self, store: str, condition: str, lost: str) -> None:
        self.problem = f"{store} ignores {condition}: {lost}"
        super().__init__(f"{self.problem}; {self.FIX}")
        self.store = store
        self.condition = condition


class NotFoundError(S3PersistenceError):
    """The object or item asked for does not exist (resolved inside the library)."""


class ClosedError(S3PersistenceError):
    """The saver or store was closed while this call was running."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or "the saver or store was closed while this call was running; nothing after its "
            "last completed request was done: retry it on an open one"
        )


class CheckpointConflictError(ConflictError):
    """A checkpoint id was stored twice with different content."""


class ClockSkewError(CheckpointConflictError):
    """A checkpoint's id is older than its parent's: the writer's clock is behind the
    clock of the writer before it (ids are time-ordered uuid6, made by LangGraph from
    the local clock), so it could only ever be a side branch. Refused before any
    request instead of silently becoming one; ``skew`` is by how much (seconds, at
    least; None when the ids carry no time)."""

    def __init__(self, checkpoint_id: str, parent_id: str, skew: float | None) -> None:
        by = f"{skew:.3f} s" if skew is not None else "an unknown amount"
        super().__init__(
            f"checkpoint {checkpoint_id} is older than its parent {parent_id} by {by}: "
            f"this process's clock is at least that far behind the one that wrote the "
            "parent (clock skew). Nothing was written; synchronize the clocks (NTP, "
            "chrony) and run the turn again"
        )
        self.checkpoint_id, self.parent_id, self.skew = checkpoint_id, parent_id, skew


def _imported_before(imported: tuple[str, ...], replace: str) -> str:
    if not imported:
        return "nothing of the file was imported"
    names = ", ".join(repr(t) for t in imported[:5])
    if len(imported) > 5:
        names += f", ... {imported[-1]!r} ({len(imported)} in all)"
    return (
        f"imported before it: {names} (a second import refuses them without {replace}: "
        "use it, or import a file without them)"
    )


class CorruptExportError(CorruptObjectError):
    """An export file cannot be imported: not gzip though named ``.gz``, cut off,
    not JSON Lines, or a record that is damaged, of the wrong type or whose value
    the saver's serializer cannot decode.

    Found while the thread it is in was being checked, so nothing of that thread
    was written; ``imported`` names the threads of the file imported before it.
    """

    def __init__(
        self,
        file: str,
        reason: str,
        *,
        imported: tuple[str, ...] = (),
        replace: str = "replace=True",
    ) -> None:
        S3PersistenceError.__init__(
            self, f"{file}: {reason}; {_imported_before(imported, replace)}"
        )
        self.key = self.file = file
        self.reason = reason
        self.imported = imported


class ThreadExistsError(InvalidRequestError):
    """An import met a thread the target already has, without ``replace``.

    Nothing of that thread was written; ``imported`` names the threads of the
    file imported before it.
    """

    def __init__(
        self,
        thread_id: str,
        file: str,
        *,
        line: int = 0,
        imported: tuple[str, ...] = (),
        replace: str = "replace=True",
    ) -> None:
        super().__init__(
            f"{file}{f', line {line}' if line else ''}: thread {thread_id!r} already has "
            "checkpoints in the target, so "
            f"nothing of it was written: delete it first, or import with {replace} (which "
            f"deletes it); {_imported_before(imported, replace)}"
        )
        self.thread_id, self.file, self.line = thread_id, file, line
        self.imported = imported
