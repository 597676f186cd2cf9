"""One contract, three backends: memory, an SQLite file and a PostgreSQL schema.

The backend-independent contract lives in :mod:`treasury_core.testing.contract`, shipped so that
third-party storage adapters run exactly what ours pass; it runs here on each backend of the
parametrized ``storage`` fixture (tests/conftest.py). The tests below it depend on the backend.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from treasury_core.ledger import Journal, Move
from treasury_core.testing.contract import (
    StorageContract,
    account,
    apply,
    make_wallet,
    open_accounts,
    setup_company,
    wallet_account,
    world,
)


class TestStorageContract(StorageContract):
    """The shipped contract on memory, SQLite and PostgreSQL (the conftest's ``storage``)."""


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
    import sqlite3

    from treasury_core.errors import ConflictRetryExhausted
    from treasury_sqlalchemy.storage import SqlStorage

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
