"""SQLite group commit: concurrent writes share commits, yet each stays all-or-nothing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from treasury_core.ports import UnitOfWork, background_writes
from treasury_sqlalchemy import storage as storage_module
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


def _migrated(tmp_path: Path) -> SqlStorage:
    storage = SqlStorage(f"sqlite:///{tmp_path / 'group.db'}")
    storage.migrate()
    return storage


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
    storage = _migrated(tmp_path)

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
    storage = _migrated(tmp_path)

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
    storage = _migrated(tmp_path)

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


class _HeldWriter:
    """Holds the group writer inside one write until released, so that the writes submitted
    meanwhile queue up and are then taken as one group (deterministic, no timing)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.thread: int | None = None

    def write(self, uow: UnitOfWork) -> int:
        self.thread = threading.get_ident()
        self.entered.set()
        assert self.release.wait(30), "never released"
        return uow.companies.add_company("held", NOW).id

    async def hold(self, storage: SqlStorage) -> asyncio.Task[int]:
        task = asyncio.ensure_future(storage.run(self.write))
        entered = await asyncio.get_running_loop().run_in_executor(None, self.entered.wait, 30)
        assert entered, "the writer never took the held write"
        return task

    async def queue(
        self, storage: SqlStorage, writes: Sequence[Callable[[UnitOfWork], int]]
    ) -> tuple[asyncio.Task[int], list[asyncio.Future[int]]]:
        """Hold the writer, then submit ``writes``: they wait behind the held write, to be taken
        as one group once it is released. The held write's task, and theirs."""
        first = await self.hold(storage)
        started = [asyncio.Event() for _ in writes]

        async def submit(write: Callable[[UnitOfWork], int], started: asyncio.Event) -> int:
            started.set()
            # No suspension point between the signal and the write entering the writer's
            # queue: ``run`` submits before its first await.
            return await storage.run(write)

        queued = [asyncio.ensure_future(submit(w, e)) for w, e in zip(writes, started, strict=True)]
        await asyncio.gather(*(e.wait() for e in started))  # every write is in the queue
        return first, queued


def _traced(name: str, threads: list[int], fail: type[BaseException] | None = None) -> Any:
    def write(uow: UnitOfWork) -> int:
        threads.append(threading.get_ident())
        company = uow.companies.add_company(name, NOW)
        if fail is not None:
            raise fail(name)
        return company.id

    return write


@pytest.fixture
def patient_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grace period no loaded machine can outlast: which thread ran a group is then decided
    by the code, never by how fast the loop got to it."""
    monkeypatch.setattr(storage_module, "LOOP_GRACE_SECONDS", 60.0)


@pytest.mark.usefixtures("patient_writer")
def test_a_groups_functions_run_on_the_callers_loop_thread(tmp_path: Path) -> None:
    # The writer thread keeps the waits (lock, BEGIN, COMMIT); the functions, which are Python,
    # take their turn on the loop instead of fighting it for the GIL.
    storage = _migrated(tmp_path)
    held = _HeldWriter()
    threads: list[int] = []

    async def scenario() -> int:
        first, writes = await held.queue(storage, [_traced(f"c{i}", threads) for i in range(10)])
        held.release.set()
        ids = await asyncio.gather(first, *writes)
        assert len(set(ids)) == 11
        return threading.get_ident()

    try:
        loop_thread = asyncio.run(scenario())
        assert threads == [loop_thread] * 10
        assert held.thread is not None and held.thread != loop_thread  # a lone write: the writer's
        assert _names(storage) == {"held"} | {f"c{i}" for i in range(10)}
    finally:
        storage.close()


def test_a_loop_that_cannot_take_its_turn_does_not_hold_up_the_writer(tmp_path: Path) -> None:
    # The loop's thread is blocked (here waiting for the group itself, as a synchronous caller on
    # the loop's thread would be): the writer runs the group on its own thread after the grace
    # period instead of waiting for ever.
    storage = _migrated(tmp_path)
    held = _HeldWriter()
    threads: list[int] = []
    ran = threading.Event()

    def signalling(name: str) -> Callable[[UnitOfWork], int]:
        inner = _traced(name, threads)

        def write(uow: UnitOfWork) -> int:
            value: int = inner(uow)
            ran.set()
            return value

        return write

    async def scenario() -> int:
        first, writes = await held.queue(storage, [signalling(f"c{i}") for i in range(5)])
        held.release.set()
        assert ran.wait(30), "the group never ran while its loop was blocked"  # blocks the loop
        await asyncio.gather(first, *writes)
        return threading.get_ident()

    try:
        loop_thread = asyncio.run(scenario())
        assert len(threads) == 5 and loop_thread not in threads
        assert _names(storage) == {"held"} | {f"c{i}" for i in range(5)}
    finally:
        storage.close()


def test_a_synchronous_write_on_the_loop_thread_meets_a_group_without_deadlock(
    tmp_path: Path,
) -> None:
    # run_sync on the loop's thread waits for the write lock the writer may hold while its
    # group waits for that same loop; whichever gets the lock first, both writes complete.
    storage = _migrated(tmp_path)
    held = _HeldWriter()

    async def scenario() -> None:
        first, writes = await held.queue(storage, [_add(f"c{i}") for i in range(5)])
        held.release.set()
        storage.run_sync(_add("sync"))  # blocks the loop's thread
        await asyncio.gather(first, *writes)

    # On a thread of its own, so that a deadlock fails the test instead of hanging the run.
    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(scenario())
        except BaseException as exc:
            failures.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    try:
        runner.start()
        runner.join(60)
        assert not runner.is_alive(), "deadlocked: the loop and the writer wait for each other"
        assert failures == []
        assert _names(storage) == {"held", "sync"} | {f"c{i}" for i in range(5)}
    finally:
        if not runner.is_alive():
            storage.close()


@pytest.mark.usefixtures("patient_writer")
def test_a_base_exception_in_a_group_on_the_loop_reaches_every_caller_not_the_loop(
    tmp_path: Path,
) -> None:
    storage = _migrated(tmp_path)
    held = _HeldWriter()
    threads: list[int] = []
    leaked: list[dict[str, Any]] = []

    async def scenario() -> tuple[list[object], int]:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: leaked.append(context))
        first, writes = await held.queue(
            storage, [_traced(f"c{i}", threads, Escaped if i == 2 else None) for i in range(4)]
        )
        held.release.set()
        await first
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        # The loop lives on, and so does the writer.
        assert await storage.run(_add("after")) >= 1
        return outcomes, threading.get_ident()

    try:
        outcomes, loop_thread = asyncio.run(scenario())
        # The group ran on the loop up to the function that raised (the fourth never ran)...
        assert threads == [loop_thread] * 3
        # ...and what escaped it went to its callers, all of them, not to the loop's handler.
        assert all(isinstance(o, Escaped) for o in outcomes)
        assert leaked == []
        assert _names(storage) == {"held", "after"}
    finally:
        storage.close()


@pytest.mark.usefixtures("patient_writer")
def test_background_writes_stay_on_the_writer_thread(tmp_path: Path) -> None:
    # A purge or a fan-out of hundreds of events must not stop the loop from serving.
    storage = _migrated(tmp_path)
    held = _HeldWriter()
    threads: list[int] = []

    async def scenario() -> int:
        with background_writes():
            first, writes = await held.queue(storage, [_traced(f"c{i}", threads) for i in range(5)])
        held.release.set()
        await asyncio.gather(first, *writes)
        return threading.get_ident()

    try:
        loop_thread = asyncio.run(scenario())
        assert len(threads) == 5 and loop_thread not in threads
        assert _names(storage) == {"held"} | {f"c{i}" for i in range(5)}
    finally:
        storage.close()


@pytest.mark.usefixtures("patient_writer")
def test_a_group_from_a_closed_loop_is_written_by_the_writer(tmp_path: Path) -> None:
    # Its callers are gone, but their writes were submitted: they are run (at once, not after
    # a grace period nobody is waiting out) and the writer serves the next caller.
    storage = _migrated(tmp_path)
    held = _HeldWriter()
    threads: list[int] = []

    async def submit() -> list[asyncio.Future[int]]:
        first, writes = await held.queue(storage, [_traced(f"c{i}", threads) for i in range(3)])
        for write in (first, *writes):
            write.cancel()
        return [first, *writes]

    loop = asyncio.new_event_loop()
    try:
        writes = loop.run_until_complete(submit())
        loop.run_until_complete(asyncio.gather(*writes, return_exceptions=True))
        loop_thread = threading.get_ident()
    finally:
        loop.close()
    try:
        held.release.set()
        # The next write waits for the group before it (one writer), so once it is answered the
        # closed loop's group has been run.
        assert asyncio.run(asyncio.wait_for(storage.run(_add("after")), timeout=30)) >= 1
        assert len(threads) == 3 and loop_thread not in threads
        assert _names(storage) == {"held", "after"} | {f"c{i}" for i in range(3)}
    finally:
        storage.close()
