"""How a deployment says whom a thread or a store namespace belongs to (its subject: a
user, a tenant), so that their content can be sealed with the subject's key and
forgotten with it. Threads and namespaces without a subject behave exactly as without
a policy.

A thread's subject comes from its checkpoints' metadata (``metadata_key``: LangGraph
copies the run config's ``configurable`` values and ``metadata`` into every
checkpoint's metadata, so ``{"configurable": {"user_id": "u1"}}`` names ``u1``), or from
a function of that metadata; a namespace's from one of its labels (``namespace_label``:
``("users", "u1", "memories")`` with label 1 names ``u1``), or from a function. A
subject is a non-empty string (an integer is taken as its decimal text), normalized to
Unicode NFC, so that one person written two ways is one subject.

Pure logic: no I/O.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph_s3.errors import InvalidRequestError

__all__ = ["MAX_SUBJECT_CHARS", "SubjectPolicy", "normalize_subject", "policy_of"]

MAX_SUBJECT_CHARS = 1024
"""The longest subject id (a user id, an email, a tenant's name)."""


def normalize_subject(value: Any, where: str = "subject") -> str:
    """``value`` as a subject id: a non-empty string (an ``int`` as its decimal text) in
    Unicode NFC; InvalidRequestError for anything else, naming ``where`` it came from."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidRequestError(
            f"{where} must be a string or an integer naming a subject, got "
            f"{type(value).__name__}: fix the value, or the deployment's subject policy"
        )
    text = unicodedata.normalize("NFC", str(value))
    if not text or len(text) > MAX_SUBJECT_CHARS:
        raise InvalidRequestError(
            f"{where} must be 1 to {MAX_SUBJECT_CHARS} characters, got {len(text)}"
        )
    return text


@dataclass(frozen=True)
class SubjectPolicy:
    """A deployment's subjects: at most one source for threads and one for namespaces."""

    metadata_key: str | None = None
    """The checkpoint metadata key naming a thread's subject (``"user_id"``)."""
    of_thread: Callable[[Mapping[str, Any]], Any] | None = None
    """Or a function of a checkpoint's metadata: the subject, or None for none."""
    namespace_label: int | None = None
    """The index of the namespace label naming a store item's subject."""
    of_namespace: Callable[[tuple[str, ...]], Any] | None = None
    """Or a function of the namespace: the subject, or None for none."""

    def __post_init__(self) -> None:
        if self.metadata_key is not None and self.of_thread is not None:
            raise InvalidRequestError(
                "name a thread's subject by metadata_key or of_thread, not both"
            )
        if self.namespace_label is not None and self.of_namespace is not None:
            raise InvalidRequestError(
                "name a namespace's subject by namespace_label or of_namespace, not both"
            )
        if self.metadata_key is not None and not self.metadata_key:
            raise InvalidRequestError("metadata_key must be a non-empty string")
        if self.namespace_label is not None and (
            isinstance(self.namespace_label, bool) or self.namespace_label < 0
        ):
            raise InvalidRequestError("namespace_label must be a label's index, 0 or more")

    @property
    def active(self) -> bool:
        """Whether the deployment declares subjects at all (else nothing is sealed)."""
        return any(
            x is not None
            for x in (self.metadata_key, self.of_thread, self.namespace_label, self.of_namespace)
        )

    def thread_subject(self, metadata: Mapping[str, Any]) -> str | None:
        """The subject of the thread whose checkpoint carries ``metadata``, or None."""
        if self.metadata_key is not None:
            value = metadata.get(self.metadata_key)
            where = f"checkpoint metadata {self.metadata_key!r}"
        elif self.of_thread is not None:
            value = self.of_thread(metadata)
            where = "the subject policy's of_thread"
        else:
            return None
        return None if value is None else normalize_subject(value, where)

    def namespace_subject(self, namespace: tuple[str, ...]) -> str | None:
        """The subject of a store item in ``namespace``, or None (a namespace too short
        to have the label has none)."""
        if self.namespace_label is not None:
            if self.namespace_label >= len(namespace):
                return None
            value: Any = namespace[self.namespace_label]
            where = f"namespace label {self.namespace_label}"
        elif self.of_namespace is not None:
            value = self.of_namespace(namespace)
            where = "the subject policy's of_namespace"
        else:
            return None
        return None if value is None else normalize_subject(value, where)


def policy_of(
    subjects: SubjectPolicy | str | int | None, label: int | None = None
) -> SubjectPolicy | None:
    """The policy a constructor's arguments declare: ``subjects`` a policy, a metadata key
    (``"user_id"``: threads) or a label's index (``1``: namespaces); ``label`` (a
    connection string's ``subject_label``) a namespace label beside it. None when they
    declare no subject at all."""
    if isinstance(subjects, bool):
        raise InvalidRequestError("subjects= is a policy, a metadata key or a label's index")
    if isinstance(subjects, str):
        policy: SubjectPolicy | None = SubjectPolicy(metadata_key=subjects)
    elif isinstance(subjects, int):
        policy = SubjectPolicy(namespace_label=subjects)
    else:
        policy = subjects
    if label is not None:
        if policy is not None and (
            policy.namespace_label is not None or policy.of_namespace is not None
        ):
            raise InvalidRequestError(
                "subject_label names a namespace's subject that subjects= names already: "
                "give one of them"
            )
        base = policy or SubjectPolicy()
        policy = SubjectPolicy(base.metadata_key, base.of_thread, label, None)
    return policy if policy is not None and policy.active else None
