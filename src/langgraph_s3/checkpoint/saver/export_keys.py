"""The keys of sealed exports: a subject's thread sealed on its way out (the key of its
subject's life), opened on its way in (the deployment's own subjects, or the source
deployment's), and each export of a subject's threads noted on its record, so that the
receipt of its forgetting says which kinds of export were made."""

from __future__ import annotations

from langgraph_s3.checkpoint.transfer.sealed import KeyFor, SealFor
from langgraph_s3.core.keys import encode
from langgraph_s3.core.sealing import DataKey
from langgraph_s3.errors import ConfigurationError, SealBrokenError, SubjectForgottenError
from langgraph_s3.runtime.thread_seals import ThreadSeals

__all__ = ["export_sealer", "import_keys", "note_exports"]


def export_sealer(seals: ThreadSeals, noted: dict[tuple[str, int], bool], sealed: bool) -> SealFor:
    """What an export asks of each thread: its subject's token, life and key when it
    is sealed for one and ``sealed`` (else None: written plain); every subject whose
    thread it writes is noted in ``noted`` (1 GetItem per thread this process has not
    read; a key once per subject and bound)."""

    async def seal_for(thread_id: str) -> tuple[str, int, DataKey] | None:
        seal = await seals.seal_of(encode(thread_id, "thread_id"))
        if seal is None:
            return None
        noted[(seal.token, seal.life)] = True
        if not sealed:
            return None
        return seal.token, seal.life, await seals.subjects.key_of_life(seal.token, seal.life)

    return seal_for


def import_keys(seals: ThreadSeals) -> KeyFor:
    """The keys a sealed export's threads open with, from ``seals``' deployment: None
    for a subject forgotten since (its threads are skipped).

    Raises:
        ConfigurationError: the subject is unknown to that deployment (the file was
            sealed by another one: pass ``sealed_by=``).
        SealBrokenError: the line names a key its subject never had in that life.
    """

    async def key_for(token: str, life: int, key_id: bytes) -> DataKey | None:
        registry = seals.subjects.registry
        try:
            return await seals.subjects.key_for_read(token, key_id, life=life)
        except SubjectForgottenError:
            record = await registry.get(token)
            if record is None:
                raise ConfigurationError(
                    f"the export is sealed for subject {token}, whom this deployment never "
                    "knew: it was made by another deployment; import it with sealed_by= "
                    "(its saver; the CLI's --sealed-by URL)"
                ) from None
            kept = await registry.life_of(token, life)
            if life > record.life or (kept is not None and kept.key_id not in (None, key_id)):
                raise SealBrokenError(
                    f"subject {token}'s life {life}", "a key that life never had (changed?)"
                ) from None
            return None  # that life was forgotten: its key is destroyed

    return key_for


async def note_exports(
    seals: ThreadSeals, noted: dict[tuple[str, int], bool], *, sealed: bool
) -> None:
    """Count one export of each noted subject's threads on its record (1 UpdateItem
    each): the receipt of its forgetting names the plaintext and sealed ones."""
    for token, life in noted:
        await seals.subjects.registry.note_export(token, life, sealed=sealed)
