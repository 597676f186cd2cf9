"""Treasury records (transfers, deposits, refunds, ...): indexed columns plus the record as JSON."""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_json
from sqlalchemy import Connection, bindparam, select, update

from treasury_core.listing import RecordFilter
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.events import Event
from treasury_core.ports.storage import R
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import HotInsert, HotQuery
from treasury_sqlalchemy.metadata_filter import metadata_where
from treasury_sqlalchemy.outbox import INSERT_EVENT, event_values
from treasury_sqlalchemy.record_lists import newest_first, record_page

_RECORD_BY_ID = select(t.treasury_records.c.body).where(
    t.treasury_records.c.id == bindparam("record_id"),
    t.treasury_records.c.kind == bindparam("kind"),
)
_RECORD_OF_COMPANY = _RECORD_BY_ID.where(t.treasury_records.c.company_id == bindparam("company_id"))
#: Record lookups by (scoped to a company, FOR UPDATE).
_RECORD_QUERIES = {
    (scoped, locked): HotQuery(q.with_for_update() if locked else q)
    for scoped, q in ((False, _RECORD_BY_ID), (True, _RECORD_OF_COMPANY))
    for locked in (False, True)
}

# Rows every transfer, deposit, withdrawal and settlement writes (see hot.py).
_INSERT_RECORD = HotInsert(t.treasury_records)


def _record_json(record: TreasuryRecord) -> str:
    # Python-mode dump keeps rates as exact Decimals, which pydantic-core's encoder writes as
    # their str() (JSON mode would not do: the interface renders rates as JSON numbers, which
    # are floats). Datetimes are written in ISO 8601; anything else it cannot encode raises.
    return to_json(record.model_dump(mode="python")).decode()


class SqlRecords:
    """Treasury records: indexed columns plus the record as JSON."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    def _values(self, record: TreasuryRecord) -> dict[str, Any]:
        return {
            "status": record.status_value,
            "lookup_key": record.lookup_key,
            "body": _record_json(record),
        }

    def add(self, record: TreasuryRecord, event: Event | None = None) -> None:
        values = {
            "id": record.id,
            "kind": record.prefix,
            "company_id": record.company_id,
            "created_at": record.created_at,
            **self._values(record),
        }
        if event is None:
            _INSERT_RECORD.execute(self._conn, values)
        else:
            # The record and the event announcing it: one round trip on PostgreSQL.
            _INSERT_RECORD.execute_with(self._conn, values, INSERT_EVENT, event_values(event))

    def get(
        self, kind: type[R], record_id: str, company_id: int | None, *, for_update: bool = False
    ) -> R | None:
        query = _RECORD_QUERIES[company_id is not None, for_update and self._lock_rows]
        params: dict[str, Any] = {"record_id": record_id, "kind": kind.prefix}
        if company_id is not None:
            params["company_id"] = company_id
        row = query.first(self._conn, params)
        return kind.model_validate_json(row[0]) if row is not None else None

    def update(self, record: TreasuryRecord) -> None:
        records = t.treasury_records
        result = self._conn.execute(
            update(records).where(records.c.id == record.id).values(self._values(record))
        )
        if result.rowcount != 1:
            raise LookupError(f"no record {record.id}")

    def list(
        self,
        kind: type[R],
        company_id: int,
        limit: int,
        starting_after: str | None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> list[R]:
        records = t.treasury_records
        query = select(records.c.body).where(
            records.c.company_id == company_id,
            records.c.kind == kind.prefix,
            *metadata_where(records.c.body, metadata),
        )
        query = newest_first(query, records.c.id, limit, starting_after)
        return [
            kind.model_validate(json.loads(body)) for body in self._conn.execute(query).scalars()
        ]

    def page(
        self,
        kind: type[R],
        company_id: int,
        filters: RecordFilter,
        limit: int,
        starting_after: str | None,
    ) -> builtins.list[R]:
        return record_page(self._conn, kind, company_id, filters, limit, starting_after)

    def find(self, kind: type[R], lookup_key: str) -> R | None:
        records = t.treasury_records
        body = self._conn.execute(
            select(records.c.body)
            .where(records.c.kind == kind.prefix, records.c.lookup_key == lookup_key)
            .limit(1)
        ).scalar_one_or_none()
        return kind.model_validate(json.loads(body)) if body is not None else None

    def with_status(
        self, kind: type[R], status: str, limit: int, after_id: str | None = None
    ) -> builtins.list[R]:
        records = t.treasury_records
        query = select(records.c.body).where(
            records.c.kind == kind.prefix, records.c.status == status
        )
        if after_id is not None:
            query = query.where(records.c.id > after_id)
        query = query.order_by(records.c.id).limit(limit)
        return [
            kind.model_validate(json.loads(body)) for body in self._conn.execute(query).scalars()
        ]
