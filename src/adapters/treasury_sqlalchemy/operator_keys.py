"""The operator's keys over one SQLAlchemy connection."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from treasury_core.operators import OperatorKey
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import HotQuery

_COLUMNS = tuple(c.name for c in t.operator_keys.c)
# Every request to an operator route looks its key up: built once.
_BY_HASH = HotQuery(
    select(t.operator_keys).where(t.operator_keys.c.key_hash == bindparam("key_hash"))
)


class SqlOperatorKeys:
    """Operator keys."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def add(self, key: OperatorKey) -> bool:
        try:
            # A savepoint: the refused insert must not end the caller's transaction.
            with self._conn.begin_nested():
                self._conn.execute(insert(t.operator_keys), [key.model_dump(mode="python")])
        except IntegrityError:
            # The live-name index refused it (two creations racing past the service's check);
            # any other violation (a digest twice) is not the caller's to handle.
            if self._live_name_taken(key.name):
                return False
            raise
        return True

    def _live_name_taken(self, name: str) -> bool:
        found = self._conn.execute(
            select(t.operator_keys.c.id).where(
                t.operator_keys.c.name == name, t.operator_keys.c.revoked_at.is_(None)
            )
        ).first()
        return found is not None

    def by_hash(self, key_hash: str) -> OperatorKey | None:
        row = _BY_HASH.first(self._conn, {"key_hash": key_hash})
        if row is None:
            return None
        return OperatorKey.model_validate(dict(zip(_COLUMNS, row, strict=True)))

    def list(self) -> list[OperatorKey]:
        rows = self._conn.execute(
            select(t.operator_keys).order_by(t.operator_keys.c.created_at, t.operator_keys.c.id)
        )
        return [OperatorKey.model_validate(dict(r._mapping)) for r in rows]

    def revoke(self, key_id: str, revoked_at: datetime) -> bool:
        result = self._conn.execute(
            update(t.operator_keys)
            .where(t.operator_keys.c.id == key_id, t.operator_keys.c.revoked_at.is_(None))
            .values(revoked_at=revoked_at)
        )
        return result.rowcount == 1
