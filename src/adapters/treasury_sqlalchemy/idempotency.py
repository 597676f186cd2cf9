"""Idempotency records over one SQLAlchemy connection."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from treasury_core.idempotency import IdempotencyRecord, IdempotencyState, StoredResult
from treasury_sqlalchemy import schema as t


class SqlIdempotency:
    """Idempotency records."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    @staticmethod
    def _values(record: IdempotencyRecord) -> dict[str, Any]:
        return {
            "company_id": record.company_id,
            "key": record.key,
            "fingerprint": record.fingerprint,
            "state": record.state.value,
            "token": record.token,
            "created_at": record.created_at,
            "lease_until": record.lease_until,
            "response_status": record.result.status if record.result else None,
            "response_body": record.result.body if record.result else None,
            "resource": record.resource,
        }

    def get(self, company_id: int, key: str) -> IdempotencyRecord | None:
        row = self._conn.execute(
            select(t.idempotency_keys).where(
                t.idempotency_keys.c.company_id == company_id, t.idempotency_keys.c.key == key
            )
        ).first()
        if row is None:
            return None
        m = row._mapping
        result = None
        if m["response_status"] is not None:
            result = StoredResult(m["response_status"], bytes(m["response_body"]))
        return IdempotencyRecord(
            company_id=m["company_id"],
            key=m["key"],
            fingerprint=m["fingerprint"],
            state=IdempotencyState(m["state"]),
            token=m["token"],
            created_at=m["created_at"],
            lease_until=m["lease_until"],
            result=result,
            resource=m["resource"],
        )

    def insert(self, record: IdempotencyRecord) -> bool:
        try:
            with self._conn.begin_nested():
                self._conn.execute(insert(t.idempotency_keys), [self._values(record)])
        except IntegrityError:
            return False
        return True

    def replace(self, record: IdempotencyRecord, expected_token: str) -> bool:
        values = self._values(record)
        result = self._conn.execute(
            update(t.idempotency_keys)
            .where(
                t.idempotency_keys.c.company_id == record.company_id,
                t.idempotency_keys.c.key == record.key,
                t.idempotency_keys.c.token == expected_token,
            )
            .values({k: v for k, v in values.items() if k not in ("company_id", "key")})
        )
        return result.rowcount == 1

    def delete(self, company_id: int, key: str, expected_token: str) -> bool:
        result = self._conn.execute(
            delete(t.idempotency_keys).where(
                t.idempotency_keys.c.company_id == company_id,
                t.idempotency_keys.c.key == key,
                t.idempotency_keys.c.token == expected_token,
                t.idempotency_keys.c.state == IdempotencyState.IN_FLIGHT.value,
            )
        )
        return result.rowcount == 1

    def purge(self, created_before: datetime) -> int:
        result = self._conn.execute(
            delete(t.idempotency_keys).where(t.idempotency_keys.c.created_at < created_before)
        )
        return int(result.rowcount)
