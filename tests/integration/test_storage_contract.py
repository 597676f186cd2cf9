"""One contract, three backends: memory, an SQLite file and a PostgreSQL schema.

The backend-independent contract lives in :mod:`treasury_core.testing.contracts.storage`, shipped
so that
third-party storage adapters run exactly what ours pass; it runs here on each backend of the
parametrized ``storage`` fixture (tests/conftest.py). The tests below it depend on the backend.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from treasury_core.errors import ConflictRetryExhausted
from treasury_core.idempotency import IdempotencyRecord, IdempotencyState
from treasury_core.ledger import BalanceRecord, Journal, Move
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.storage import (
    NOW,
    Boom,
    StorageContract,
    account,
    apply,
    make_wallet,
    open_accounts,
    setup_company,
    wallet_account,
    world,
)
from treasury_sqlalchemy.repositories import SqlUnitOfWork
from treasury_sqlalchemy.storage import SqlStorage


class TestStorageContract(StorageContract):
    """The shipped contract on memory, SQLite and PostgreSQL (the conftest's ``storage``)."""


class TestStripedSqliteContract(StorageContract):
    """The contract again on SQLite with striped counters, which SQLite leaves off by default
    (one writer at a time gains nothing from them): the striped path is then exercised on both
    SQL backends, PostgreSQL having them on by default."""

    @pytest.fixture
    def storage(self, sqlite_url: str) -> Iterator[Storage]:
        striped = SqlStorage(sqlite_url, pool_size=4, hot_stripes=4)
        striped.migrate()
        try:
            yield striped
        finally:
            striped.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_snapshot_reads_do_not_see_later_commits(kind: str, request: pytest.FixtureRequest) -> None:
    from tests.conftest import make_storage

    storage = make_storage(kind, request)
    try:
        open_accounts(storage, world(), wallet_account("wal_a"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 10),)))
        with storage.transaction(write=False, snapshot=True) as uow:
            first = uow.ledger.get_account("wal_a")
            writer = threading.Thread(
                target=apply, args=(storage, Journal("j2", (Move("world:USD", "wal_a", "USD", 5),)))
            )
            writer.start()
            writer.join()
            postings = list(uow.ledger.postings())
            again = uow.ledger.get_account("wal_a")
        assert first == again
        assert [p.id for p in postings] == ["j1.0"]
        assert account(storage, "wal_a").balance == 15
    finally:
        storage.close()


def test_a_failed_begin_leaves_the_worker_connection_usable(sqlite_url: str) -> None:
    """Another process holds the write lock past our timeout; afterwards everything works."""
    storage = SqlStorage(sqlite_url, pool_size=1, busy_timeout=0.05)
    storage.max_attempts = 2
    storage.migrate()
    company = setup_company(storage)
    blocker = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)

    async def scenario() -> int:
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(ConflictRetryExhausted):
                await storage.run(lambda uow: uow.wallets.add(make_wallet("wal_a", company)))
        finally:
            blocker.execute("ROLLBACK")
        # The same worker thread (pool of one) writes and reads normally again.
        await storage.run(lambda uow: uow.wallets.add(make_wallet("wal_b", company)))
        return len(await storage.run(lambda uow: uow.wallets.list(company, 10, None), write=False))

    try:
        assert asyncio.run(scenario()) == 1
    finally:
        blocker.close()
        storage.close()


# A write on a thread that keeps its connection (the SQLite group writer, the PostgreSQL worker
# threads) is begun and committed on the driver's connection (SqlStorage._write_here): it must
# commit what either kind of statement wrote, and leave nothing of a failed function behind.


def _one_connection_storage(kind: str, request: pytest.FixtureRequest) -> tuple[SqlStorage, int]:
    """A migrated storage of one worker thread and connection (every write shares it), with a
    company and the USD world and ``wal_a`` accounts open."""
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "postgres_url")
    storage = SqlStorage(url, pool_size=1)
    storage.migrate()
    company = setup_company(storage)
    open_accounts(storage, world(), wallet_account("wal_a"))
    return storage, company


def _kept_storage(kind: str, request: pytest.FixtureRequest) -> tuple[SqlStorage, int]:
    """As :func:`_one_connection_storage`, and the calling thread keeps its connection, as a
    worker does."""
    storage, company = _one_connection_storage(kind, request)
    storage._worker_started()
    storage.run_sync(lambda uow: None)  # through transaction() once: connects and keeps
    return storage, company


def _wallet_ids(storage: SqlStorage, company: int) -> list[str]:
    """The company's wallet ids as stored, newest first."""
    listed = storage.run_sync(lambda uow: uow.wallets.list(company, 10, None), write=False)
    return [w.id for w in listed]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_write_on_a_kept_connection_commits_all_or_nothing(
    kind: str, request: pytest.FixtureRequest
) -> None:
    storage, company = _one_connection_storage(kind, request)

    def both(uow: UnitOfWork, wallet_id: str, journal_id: str) -> None:
        # The short path: SQLAlchemy's side of the transaction is not begun (transaction()
        # begins it), until a statement runs through SQLAlchemy.
        assert isinstance(uow, SqlUnitOfWork)
        assert uow.connection.in_transaction() is (wallet_id == "wal_b")  # wal_b: the first
        uow.wallets.add(make_wallet(wallet_id, company))  # through SQLAlchemy's Connection
        move = Move("world:USD", "wal_a", "USD", 10)
        uow.ledger.apply(Journal(journal_id, (move,)), NOW)  # on the driver's cursor

    def fails_after_both(uow: UnitOfWork) -> None:
        both(uow, "wal_x", "j_failed")
        raise Boom

    def fails_after_the_cursor(uow: UnitOfWork) -> None:
        move = Move("world:USD", "wal_a", "USD", 1000)
        uow.ledger.apply(Journal("j_cursor_only", (move,)), NOW)
        raise Boom

    async def scenario() -> None:
        await storage.run(lambda uow: both(uow, "wal_b", "j1"))  # the thread now keeps one
        for failing in (fails_after_both, fails_after_the_cursor):
            with pytest.raises(Boom):
                await storage.run(failing)
        # Left inside the failed transaction, the connection would commit its rows here.
        await storage.run(lambda uow: both(uow, "wal_c", "j2"))
        # Only the driver's cursor: nothing on SQLAlchemy's side to commit it.
        move = Move("world:USD", "wal_a", "USD", 5)
        await storage.run(lambda uow: uow.ledger.apply(Journal("j3", (move,)), NOW))

    try:
        asyncio.run(scenario())
        assert _wallet_ids(storage, company) == ["wal_c", "wal_b"]
        assert account(storage, "wal_a").balance == 25
        # The failed journals' ids are free: nothing of them was kept.
        apply(storage, Journal("j_failed", (Move("world:USD", "wal_a", "USD", 1),)))
        apply(storage, Journal("j_cursor_only", (Move("world:USD", "wal_a", "USD", 1),)))
        assert account(storage, "wal_a").balance == 27
    finally:
        storage.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_write_on_a_kept_connection_keeps_its_savepoints(
    kind: str, request: pytest.FixtureRequest
) -> None:
    storage, company = _kept_storage(kind, request)
    record = IdempotencyRecord(company, "k1", "fp", IdempotencyState.IN_FLIGHT, "t", NOW, NOW)

    def work(uow: UnitOfWork) -> None:
        uow.ledger.apply(Journal("j1", (Move("world:USD", "wal_a", "USD", 3),)), NOW)
        uow.ledger.ensure_account(world())  # there already: no savepoint
        uow.ledger.ensure_account(wallet_account("wal_new"))  # a savepoint, released
        assert uow.idempotency.insert(record) is True
        assert uow.idempotency.insert(record) is False  # a savepoint, rolled back alone
        uow.wallets.add(make_wallet("wal_sp", company))

    try:
        storage.run_sync(work)
        assert account(storage, "wal_a").balance == 3
        assert account(storage, "wal_new").balance == 0
        assert storage.run_sync(lambda uow: uow.idempotency.get(company, "k1"), write=False)
        assert storage.run_sync(lambda uow: uow.wallets.get(company, "wal_sp"), write=False)
    finally:
        storage.close()


@pytest.mark.parametrize("through", ["sqlalchemy", "cursor"])
def test_a_failed_commit_on_a_kept_connection_leaves_nothing(
    through: str, request: pytest.FixtureRequest
) -> None:
    storage, company = _kept_storage("sqlite", request)
    orphan = (
        "INSERT INTO wallets (id, company_id, name, currency, status, created_at)"
        " VALUES ('wal_orphan', 99999, 'x', 'USD', 'active', '2026-01-01 00:00:00')"
    )

    def fails_at_commit(uow: UnitOfWork) -> None:
        assert isinstance(uow, SqlUnitOfWork)
        dbapi = uow.connection.connection.dbapi_connection
        assert dbapi is not None
        dbapi.execute("PRAGMA defer_foreign_keys=ON")  # the missing company fails the COMMIT
        if through == "sqlalchemy":
            uow.connection.execute(text(orphan))
        else:
            dbapi.execute(orphan)

    try:
        with pytest.raises(Exception, match="FOREIGN KEY"):
            storage.run_sync(fails_at_commit)
        storage.run_sync(lambda uow: uow.wallets.add(make_wallet("wal_ok", company)))
        assert _wallet_ids(storage, company) == ["wal_ok"]
        assert (
            storage.run_sync(lambda uow: uow.wallets.get(99999, "wal_orphan"), write=False) is None
        )
    finally:
        storage.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_function_on_a_kept_connection_cannot_start_another_transaction(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The storage port's rule, refused loudly: on the shared connection a nested write would
    commit the outer one's rows half way, and a nested read would end its transaction."""
    storage, company = _kept_storage(kind, request)

    def nests(inner: Callable[[], object]) -> Callable[[UnitOfWork], None]:
        def outer(uow: UnitOfWork) -> None:
            uow.ledger.apply(Journal("j_outer", (Move("world:USD", "wal_a", "USD", 7),)), NOW)
            uow.wallets.add(make_wallet("wal_outer", company))
            inner()

        return outer

    nested = (
        lambda: storage.run_sync(lambda u: u.wallets.add(make_wallet("wal_inner", company))),
        lambda: storage.run_sync(lambda u: u.wallets.get(company, "wal_a"), write=False),
        lambda: storage.transaction(write=True).__enter__(),
    )
    try:
        for inner in nested:
            with pytest.raises(RuntimeError, match="another transaction"):
                storage.run_sync(nests(inner))
        assert _wallet_ids(storage, company) == []
        assert account(storage, "wal_a").balance == 0
        storage.run_sync(lambda uow: uow.wallets.add(make_wallet("wal_after", company)))
        assert _wallet_ids(storage, company) == ["wal_after"]
    finally:
        storage.close()


# SQLite reads awaited through ``run`` take a path of their own on the loop's thread (the
# connection it keeps, ``BEGIN`` and ``ROLLBACK`` written out): it must keep the transaction
# and retry rules of every other path.


def _sqlite_storage(sqlite_url: str) -> SqlStorage:
    storage = SqlStorage(sqlite_url, pool_size=2)
    storage.migrate()
    return storage


def test_a_read_on_the_loop_sees_one_snapshot(sqlite_url: str) -> None:
    storage = _sqlite_storage(sqlite_url)
    open_accounts(storage, world(), wallet_account("wal_a"))
    apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 10),)))
    journals = iter(("j2", "j3"))

    def read(uow: UnitOfWork) -> tuple[int, int]:
        first = uow.ledger.get_account("wal_a")
        # Committed by another thread between the read's two statements.
        journal = Journal(next(journals), (Move("world:USD", "wal_a", "USD", 5),))
        writer = threading.Thread(target=apply, args=(storage, journal))
        writer.start()
        writer.join()
        again = uow.ledger.get_account("wal_a")
        assert first is not None and again is not None
        return first.balance, again.balance

    async def scenario() -> tuple[tuple[int, int], tuple[int, int]]:
        await storage.run(lambda uow: uow.ledger.get_account("wal_a"), write=False)  # keeps one
        return await storage.run(read, write=False), await storage.run(read, write=False)

    try:
        assert asyncio.run(scenario()) == ((10, 10), (15, 15))
        assert account(storage, "wal_a").balance == 20
    finally:
        storage.close()


def test_a_failed_read_on_the_loop_ends_its_transaction(sqlite_url: str) -> None:
    storage = _sqlite_storage(sqlite_url)
    open_accounts(storage, world(), wallet_account("wal_a"))

    def fails(uow: UnitOfWork) -> None:
        uow.ledger.get_account("wal_a")
        raise ValueError("not this one")

    async def scenario() -> int:
        await storage.run(lambda uow: uow.ledger.get_account("wal_a"), write=False)
        with pytest.raises(ValueError, match="not this one"):
            await storage.run(fails, write=False)
        # Left inside its snapshot, the loop's connection would not see this write.
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 7),)))
        found = await storage.run(lambda uow: uow.ledger.get_account("wal_a"), write=False)
        assert found is not None
        return found.balance

    try:
        assert asyncio.run(scenario()) == 7
    finally:
        storage.close()


def test_a_busy_read_on_the_loop_is_retried_and_then_given_up(sqlite_url: str) -> None:
    storage = _sqlite_storage(sqlite_url)
    storage.max_attempts = 3
    open_accounts(storage, world(), wallet_account("wal_a"))
    calls: list[str] = []

    def busy_once(uow: UnitOfWork) -> str:
        calls.append("once")
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        found = uow.ledger.get_account("wal_a")
        assert found is not None
        return found.id

    def always_busy(uow: UnitOfWork) -> None:
        calls.append("always")
        raise sqlite3.OperationalError("database is locked")

    async def scenario() -> str:
        await storage.run(lambda uow: uow.ledger.get_account("wal_a"), write=False)
        found = await storage.run(busy_once, write=False)
        with pytest.raises(ConflictRetryExhausted):
            await storage.run(always_busy, write=False)
        return found

    try:
        assert asyncio.run(scenario()) == "wal_a"
        assert calls.count("once") == 2
        # As run_sync's rule: max_attempts in all, then given up.
        assert calls.count("always") == storage.max_attempts
    finally:
        storage.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_wallet_row_is_one_instance_however_it_is_read(
    kind: str, request: pytest.FixtureRequest
) -> None:
    from tests.conftest import make_storage

    storage = make_storage(kind, request)
    company = setup_company(storage)
    made = [
        make_wallet(f"wal_{n}", company, datetime(2026, 11, 25, 18, n, tzinfo=UTC))
        for n in range(2)
    ]
    try:
        for wallet in made:
            storage.run_sync(lambda uow, w=wallet: uow.wallets.add(w))
        first = storage.run_sync(lambda uow: uow.wallets.get(company, "wal_0"), write=False)
        again = asyncio.run(storage.run(lambda uow: uow.wallets.get(company, "wal_0"), write=False))
        listed = storage.run_sync(lambda uow: uow.wallets.list(company, 10, None), write=False)
        # Every transfer reads both its wallets: each row is made (and validated) once.
        assert first == made[0]
        assert again is first
        assert listed == made[::-1]
        assert listed[1] is first
        other = storage.run_sync(lambda uow: uow.wallets.get(company, "wal_1"), write=False)
        assert other is listed[0]
        stranger = company + 1
        assert storage.run_sync(lambda uow: uow.wallets.get(stranger, "wal_0"), write=False) is None
    finally:
        storage.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_unchanged_account_row_is_one_instance_and_a_change_is_seen(
    kind: str, request: pytest.FixtureRequest
) -> None:
    from tests.conftest import make_storage

    storage = make_storage(kind, request)
    try:
        open_accounts(storage, world(), wallet_account("wal_a"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 10),)))
        first, again = account(storage, "wal_a"), account(storage, "wal_a")
        # One instance per stored row: a polled account is made (and validated) once, whichever
        # way it is read (a read awaited on the loop, the company's wallet list).
        assert first is again
        on_loop = asyncio.run(storage.run(lambda uow: uow.ledger.get_account("wal_a"), write=False))
        listed = storage.run_sync(lambda uow: uow.ledger.wallet_accounts(1, 10, None), write=False)
        assert on_loop is first
        assert listed == [first]
        assert listed[0] is first
        apply(storage, Journal("j2", (Move("world:USD", "wal_a", "USD", 5),)))
        changed = account(storage, "wal_a")
        assert changed is not first
        assert (changed.balance, BalanceRecord.of(changed).balance) == (15, 15)
        assert BalanceRecord.of(first).balance == 10  # the old instance stays what it was
    finally:
        storage.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_transfers_between_two_wallets_continue_both_histories(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """A journal over two wallets reads both latest entries in one statement: each wallet's
    numbering must still continue from its own latest entry."""
    from tests.conftest import make_storage
    from treasury_core.testing import check_invariants

    storage = make_storage(kind, request)
    assert isinstance(storage, SqlStorage)
    try:
        open_accounts(storage, world(), wallet_account("wal_a"), wallet_account("wal_b"))
        apply(storage, Journal("fund", (Move("world:USD", "wal_a", "USD", 100),)))
        for n, (source, target) in enumerate([("wal_a", "wal_b")] * 3 + [("wal_b", "wal_a")] * 2):
            apply(storage, Journal(f"t{n}", (Move(source, target, "USD", 10),)))
        with storage.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT wallet_id, seq FROM wallet_entries ORDER BY wallet_id, seq")
            ).all()
        assert [tuple(r) for r in rows] == [("wal_a", n) for n in range(1, 7)] + [
            ("wal_b", n) for n in range(1, 6)
        ]
        assert account(storage, "wal_a").balance == 90
        check_invariants(storage)
    finally:
        storage.close()


@pytest.mark.parametrize("stripes", [0, 4])
def test_the_connections_of_a_pool_take_distinct_stripes(sqlite_url: str, stripes: int) -> None:
    """Up to ``stripes`` connections open at once never share a stripe (none without stripes)."""
    from treasury_sqlalchemy.stripes import striped_accounts

    storage = SqlStorage(sqlite_url, pool_size=4, hot_stripes=stripes)
    try:
        connections = [storage.engine.connect() for _ in range(4)]
        taken = [striped_accounts(conn)[1] for conn in connections]
        for conn in connections:
            conn.close()
        assert sorted(taken, key=str) == ([0, 1, 2, 3] if stripes else [None] * 4)
    finally:
        storage.close()
