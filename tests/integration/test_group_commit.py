"""SQLite group commit: concurrent writes share commits, yet each stays all-or-nothing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from treasury_core.ports import UnitOfWork
from treasury_sqlalchemy.storage import SAFETY_NET_CHECKPOINT_PAGES, SqlStorage

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Refused(Exception):
    """A write function that gives up after writing."""


class Escaped(BaseException):
    """Not an ``Exception``: what a function might raise that ordinary handlers miss."""


def _add(name: str, fail: type[BaseException] | None = None) -> Callable[[UnitOfWork], int]:
    def write(uow: UnitOfWork) -> int:
        company = uow.companies.add_company(name, NOW)
        if fail is not None:
            raise fail(name)
        return company.id

    return write


def _names(storage: SqlStorage) -> set[str]:
    def read(uow: UnitOfWork) -> set[str]:
        names: set[str] = set()
        company_id = 1
        while (company := uow.companies.get_company(company_id)) is not None:
            names.add(company.name)
            company_id += 1
        return names

    return storage.run_sync(read, write=False)


def test_each_write_of_a_group_stands_alone(tmp_path: Path) -> None:
    storage = SqlStorage(f"sqlite:///{tmp_path / 'group.db'}")
    storage.migrate()

    async def scenario() -> list[int | BaseException]:
        writes = [_add(f"c{i}", Refused if i % 7 == 3 else None) for i in range(60)]
        return await asyncio.gather(*(storage.run(w) for w in writes), return_exceptions=True)

    try:
        outcomes = asyncio.run(scenario())
        refused = {f"c{i}" for i in range(60) if i % 7 == 3}
        assert {str(o) for o in outcomes if isinstance(o, Refused)} == refused
        assert all(isinstance(o, int) for i, o in enumerate(outcomes) if f"c{i}" not in refused)
        # The refused writes left nothing; every acknowledged one is there.
        assert _names(storage) == {f"c{i}" for i in range(60)} - refused
    finally:
        storage.close()


def test_a_base_exception_reaches_its_caller_and_the_writer_lives_on(tmp_path: Path) -> None:
    storage = SqlStorage(f"sqlite:///{tmp_path / 'group.db'}")
    storage.migrate()

    async def scenario() -> None:
        with pytest.raises(Escaped):
            await asyncio.wait_for(storage.run(_add("lost", Escaped)), timeout=10)
        # The next write is served (it would wait forever if the writer thread had died).
        assert await asyncio.wait_for(storage.run(_add("kept")), timeout=10) >= 1

    try:
        asyncio.run(scenario())
        assert _names(storage) == {"kept"}
    finally:
        storage.close()


def test_checkpoints_run_beside_the_writer_and_stop_with_the_storage(tmp_path: Path) -> None:
    storage = SqlStorage(f"sqlite:///{tmp_path / 'group.db'}")
    storage.migrate()

    async def scenario() -> None:
        await asyncio.gather(*(storage.run(_add(f"c{i}")) for i in range(20)))

    asyncio.run(scenario())
    # Commits no longer checkpoint every 1,000 pages by themselves...
    autocheckpoint = storage.run_sync(
        lambda uow: uow.connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one(),  # type: ignore[attr-defined]
        write=False,
    )
    assert autocheckpoint == SAFETY_NET_CHECKPOINT_PAGES
    # ...a checkpoint copies every committed frame without blocking anyone...
    busy, frames, copied = storage.checkpoint()
    assert (busy, copied) == (0, frames)
    assert frames > 0
    # ...and the writer's companion thread goes away with the storage.
    writer = storage._writer
    assert writer is not None
    threads = writer.threads
    assert all(t.is_alive() for t in threads)
    storage.close()
    assert not any(t.is_alive() for t in threads)
    reopened = SqlStorage(f"sqlite:///{tmp_path / 'group.db'}")
    try:
        assert _names(reopened) == {f"c{i}" for i in range(20)}
    finally:
        reopened.close()


class _WatchedCheckpoints(SqlStorage):
    """Records every checkpoint's answer; ``copied`` is set once one copied frames."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.answers: list[tuple[int, int, int]] = []
        self.copied = threading.Event()

    def checkpoint(self, connection: sqlite3.Connection | None = None) -> tuple[int, int, int]:
        answer = super().checkpoint(connection)
        self.answers.append(answer)
        if answer[2] > 0:
            self.copied.set()
        return answer


def test_checkpoints_run_when_every_pooled_connection_is_kept(tmp_path: Path) -> None:
    # pool_size=1: two connections in all (one pooled, one overflow). The loop's thread keeps
    # one for its reads and the group writer keeps the other, so a checkpointer borrowing from
    # the pool would wait forever (and close() would wait out the pool's timeout).
    storage = _WatchedCheckpoints(f"sqlite:///{tmp_path / 'small.db'}", pool_size=1)
    storage.migrate()

    def count(uow: UnitOfWork) -> int:
        return sum(1 for _ in _names_in(uow))

    async def scenario() -> tuple[int, int]:
        before = await storage.run(count, write=False)  # the loop's thread keeps a connection
        await asyncio.gather(*(storage.run(_add(f"c{i}")) for i in range(30)))
        after = await storage.run(count, write=False)
        # The checkpointer runs beside both (waiting for an observable result, not a time).
        copied = await asyncio.get_running_loop().run_in_executor(None, storage.copied.wait, 30)
        assert copied, f"no checkpoint copied frames; answers: {storage.answers}"
        return before, after

    try:
        before, after = asyncio.run(scenario())
        assert (before, after) == (0, 30)
        writer = storage._writer
        assert writer is not None
        threads = writer.threads
        busy, frames, copied = next(a for a in storage.answers if a[2] > 0)
        assert busy == 0
        assert 0 < copied <= frames
    finally:
        storage.close()
    assert not any(t.is_alive() for t in threads)
    reopened = SqlStorage(f"sqlite:///{tmp_path / 'small.db'}")
    try:
        assert _names(reopened) == {f"c{i}" for i in range(30)}
    finally:
        reopened.close()


def _names_in(uow: UnitOfWork) -> Iterator[str]:
    company_id = 1
    while (company := uow.companies.get_company(company_id)) is not None:
        yield company.name
        company_id += 1
