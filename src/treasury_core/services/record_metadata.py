"""Changing the metadata of a stored treasury record (decisions.md, "Metadata").

One operation for every kind kept in the record store (deposits, withdrawals, transfers, bank
and virtual accounts, PMTIs): lock the record, merge, store the new version. No event fires (a
metadata change moves no money); the next event of the record carries the new metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from treasury_core.errors import NotFound
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.metadata import merged_metadata
from treasury_core.movements.records import TreasuryRecord
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.services.idempotency import finish
from treasury_core.services.record_reads import require_id

R = TypeVar("R", bound=TreasuryRecord)


async def update_record_metadata(
    storage: Storage,
    kind: type[R],
    company_id: int,
    record_id: str,
    metadata: Mapping[str, str],
    *,
    noun: str,
    param: str,
    idempotency: IdempotencyTicket[R] | None = None,
) -> R:
    """Merge ``metadata`` into the company's record of ``kind`` (``""`` deletes a key).

    Raises :class:`NotFound` naming ``param`` for another company's or an unknown id, and
    :class:`~treasury_core.errors.ValidationFailed` for a bad pair or too many keys.
    """
    require_id(record_id, kind.prefix, noun, param)

    def write(uow: UnitOfWork) -> R:
        record = uow.records.get(kind, record_id, company_id, for_update=True)
        if record is None:
            raise NotFound(f"No such {noun}: {record_id}", param=param)
        merged = merged_metadata(record.metadata, metadata)
        if merged != record.metadata:
            record = record.model_copy(update={"metadata": merged})
            uow.records.update(record)
        return finish(uow, idempotency, record)

    return await storage.run(write)
