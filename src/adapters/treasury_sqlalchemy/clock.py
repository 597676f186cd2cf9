"""The sandbox clock's offset in the database: one row of ``clock_offsets``, which every
process over the database reads, so a restart never sets business time back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from treasury_core.ports import Storage, UnitOfWork
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.repositories import SqlUnitOfWork

_MICROSECOND = timedelta(microseconds=1)


class _StoredOffset:
    """The offset's row, in one transaction: created by the first advance."""

    _NAME = "sandbox"

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def get(self) -> timedelta:
        stored = self._conn.execute(
            select(t.clock_offsets.c.offset_us).where(t.clock_offsets.c.name == self._NAME)
        ).scalar()
        return timedelta(microseconds=stored or 0)

    def _add(self, micros: int) -> bool:
        # One statement that reads and writes the row: it waits for another transaction's
        # advance (PostgreSQL's row lock; SQLite's one writer) and then adds to its result.
        result = self._conn.execute(
            update(t.clock_offsets)
            .where(t.clock_offsets.c.name == self._NAME)
            .values(offset_us=t.clock_offsets.c.offset_us + micros)
        )
        return result.rowcount == 1

    def advance(self, by: timedelta) -> timedelta:
        if by < timedelta(0):
            raise ValueError("the clock offset only grows")
        micros = by // _MICROSECOND
        if not self._add(micros):
            # The first advance ever. A concurrent first advance may insert the row first; a
            # savepoint keeps the unique-key failure from aborting ours, and we add to its row.
            try:
                with self._conn.begin_nested():
                    self._conn.execute(
                        insert(t.clock_offsets), [{"name": self._NAME, "offset_us": micros}]
                    )
            except IntegrityError:
                if not self._add(micros):  # pragma: no cover - the row was just inserted
                    raise
        return self.get()


def _stored(uow: UnitOfWork) -> _StoredOffset:
    assert isinstance(uow, SqlUnitOfWork)  # the SQL storage's transactions give no other
    return _StoredOffset(uow.connection)


class SqlClockOffsets:
    """:class:`~treasury_core.ports.ClockOffsets` over a SQL storage: each call one of its
    transactions (an advance a write, under the row's lock)."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def load(self) -> timedelta:
        return self._storage.run_sync(lambda uow: _stored(uow).get(), write=False)

    async def get(self) -> timedelta:
        return await self._storage.run(lambda uow: _stored(uow).get(), write=False)

    async def advance(
        self, by: timedelta, check: Callable[[timedelta], None] | None = None
    ) -> timedelta:
        def write(uow: UnitOfWork) -> timedelta:
            offset = _stored(uow).advance(by)
            if check is not None:
                check(offset)  # raising rolls the advance back
            return offset

        return await self._storage.run(write)
