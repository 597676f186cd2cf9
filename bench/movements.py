"""Ledger movements per second: ``SqlStorage`` against the raw driver, interleaved.

Each side has its own database (an SQLite file in one temp dir, or its own PostgreSQL schema)
migrated by the same Alembic migrations, so both write to identical tables and indexes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from bench.fixtures import NOW, JournalIds, movement, open_storage, postgres_schema, sqlite_url
from bench.raw import RawPostgres, RawSqlite
from bench.timing import Samples, Workload, interleave, timed
from treasury_core.ports.storage import UnitOfWork
from treasury_sqlalchemy.storage import SqlStorage


def storage_workload(storage: SqlStorage) -> Workload:
    """``count`` movements, each one ``run_sync`` transaction through the ledger repository."""
    ids = JournalIds("ours")

    def one() -> None:
        journal = movement(ids.next())

        def apply(uow: UnitOfWork) -> None:
            uow.ledger.apply(journal, NOW)

        storage.run_sync(apply)

    return lambda count: timed(one, count)


def raw_workload(move: Callable[[], None]) -> Workload:
    """``count`` raw-driver movements."""
    return lambda count: timed(move, count)


def bench_sqlite(count: int, reps: int) -> dict[str, Samples]:
    """``SqlStorage`` on SQLite against sqlite3; keys ``ours`` and ``raw``."""
    with tempfile.TemporaryDirectory(prefix="treasury-bench-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        storage = open_storage(sqlite_url(directory, "ours.db"))
        stack.callback(storage.close)
        # The raw side's file gets the same schema from the same migrations.
        open_storage(sqlite_url(directory, "raw.db")).close()
        raw = RawSqlite(str(directory / "raw.db"))
        stack.callback(raw.close)
        return interleave(
            {"ours": storage_workload(storage), "raw": raw_workload(raw.move)}, count, reps
        )


def bench_postgres(count: int, reps: int) -> dict[str, Samples]:
    """``SqlStorage`` on PostgreSQL against psycopg, one connection each; keys ``ours``, ``raw``."""
    with ExitStack() as stack:
        ours_url = stack.enter_context(postgres_schema())
        raw_url = stack.enter_context(postgres_schema())
        storage = open_storage(ours_url)
        stack.callback(storage.close)
        open_storage(raw_url).close()
        raw = RawPostgres(raw_url)
        stack.callback(raw.close)
        return interleave(
            {"ours": storage_workload(storage), "raw": raw_workload(raw.move)}, count, reps
        )
