"""Dashboard sessions over one SQLAlchemy connection."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, insert, select, update

from treasury_core.dashboard_sessions import DashboardSession
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import HotQuery

_TABLE = t.dashboard_sessions
_COLUMNS = tuple(c.name for c in _TABLE.c)
# Every dashboard request finds its session by digest: built once.
_BY_HASH = HotQuery(select(_TABLE).where(_TABLE.c.token_hash == bindparam("token_hash")))


class SqlDashboardSessions:
    """Dashboard sessions."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def add(self, session: DashboardSession) -> None:
        self._conn.execute(insert(_TABLE), [session.model_dump(mode="python")])

    def by_hash(self, token_hash: str) -> DashboardSession | None:
        row = _BY_HASH.first(self._conn, {"token_hash": token_hash})
        if row is None:
            return None
        return DashboardSession.model_validate(dict(zip(_COLUMNS, row, strict=True)))

    def touch(self, session_id: str, seen_at: datetime) -> None:
        self._conn.execute(
            update(_TABLE)
            .where(_TABLE.c.id == session_id, _TABLE.c.ended_at.is_(None))
            .values(last_seen_at=seen_at)
        )

    def end(self, session_id: str, ended_at: datetime) -> bool:
        result = self._conn.execute(
            update(_TABLE)
            .where(_TABLE.c.id == session_id, _TABLE.c.ended_at.is_(None))
            .values(ended_at=ended_at)
        )
        return result.rowcount == 1

    def end_for_key(self, key_id: str, ended_at: datetime) -> int:
        result = self._conn.execute(
            update(_TABLE)
            .where(_TABLE.c.key_id == key_id, _TABLE.c.ended_at.is_(None))
            .values(ended_at=ended_at)
        )
        return result.rowcount
