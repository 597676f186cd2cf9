"""Balance read cost as the postings table grows: ``get_account`` at a small and a large history.

An account's balance is its counters, so a read should cost one primary-key row whatever the
number of postings. Two databases are seeded, one with ``small`` and one with ``large`` postings
into the benchmark wallet (bulk-inserted through the migrated schema, with the account counters
set to the sums inserted and checked), and reads alternate between them.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from bench.fixtures import (
    NOW,
    NOW_SQLITE,
    SOURCE,
    WALLET,
    open_storage,
    postgres_schema,
    sqlite_url,
)
from bench.raw import RawPostgresReader, RawSqliteReader
from bench.timing import Samples, Workload, interleave, timed
from treasury_core.ports.storage import UnitOfWork
from treasury_sqlalchemy.storage import SqlStorage

_SEED_COUNTERS = (
    "UPDATE ledger_accounts SET debits_posted = debits_posted + {m} WHERE id = {m}",
    "UPDATE ledger_accounts SET credits_posted = credits_posted + {m} WHERE id = {m}",
)
_CHECK = (
    "SELECT a.credits_posted, (SELECT COALESCE(SUM(amount), 0) FROM ledger_postings"
    " WHERE credit_account_id = a.id) FROM ledger_accounts a WHERE a.id = {m}"
)


def _postings(count: int, created_at: object) -> Iterator[tuple[Any, ...]]:
    """``count`` posted moves of 1 from the world account into the wallet."""
    for n in range(count):
        journal_id = f"seed-{n}"
        yield (
            f"{journal_id}.0",
            journal_id,
            "movement",
            "posted",
            SOURCE.id,
            WALLET.id,
            "USD",
            1,
            0,
            created_at,
        )


_INSERT_COLUMNS = (
    "id, journal_id, operation, kind, debit_account_id, credit_account_id, currency, amount,"
    " released, created_at"
)


def seed_sqlite(path: str, count: int) -> None:
    """Insert ``count`` postings into a migrated SQLite file, moving the counters to match."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            f"INSERT INTO ledger_postings ({_INSERT_COLUMNS}) VALUES ({', '.join('?' * 10)})",
            _postings(count, NOW_SQLITE),
        )
        debit, credit = (sql.format(m="?") for sql in _SEED_COUNTERS)
        conn.execute(debit, (count, SOURCE.id))
        conn.execute(credit, (count, WALLET.id))
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        counter, total = conn.execute(_CHECK.format(m="?"), (WALLET.id,)).fetchone()
    finally:
        conn.close()
    _check_seeded(counter, total, count)


def seed_postgres(url: str, count: int) -> None:
    """Like :func:`seed_sqlite`, with ``COPY``."""
    import psycopg

    with psycopg.connect(url) as conn:
        with conn.cursor() as cur:
            with cur.copy(f"COPY ledger_postings ({_INSERT_COLUMNS}) FROM STDIN") as copy:
                for values in _postings(count, NOW):
                    copy.write_row(values)
            debit, credit = (sql.format(m="%s") for sql in _SEED_COUNTERS)
            cur.execute(debit, (count, SOURCE.id))
            cur.execute(credit, (count, WALLET.id))
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE ledger_postings")
        checked = conn.execute(_CHECK.format(m="%s"), (WALLET.id,)).fetchone()
    if checked is None:
        raise RuntimeError("the benchmark wallet is missing after seeding")
    _check_seeded(checked[0], checked[1], count)


def _check_seeded(counter: int, total: int, count: int) -> None:
    if not counter == total == count:
        raise RuntimeError(
            f"seeding disagrees: counter {counter}, postings sum {total}, want {count}"
        )


def read_workload(storage: SqlStorage) -> Workload:
    """``count`` balance reads, each one read-only ``run_sync`` of ``get_account``."""

    def read(uow: UnitOfWork) -> None:
        account = uow.ledger.get_account(WALLET.id)
        if account is None:
            raise LookupError(WALLET.id)

    return lambda count: timed(lambda: storage.run_sync(read, write=False), count)


class _Reader(Protocol):
    """A raw-driver balance reader (see :mod:`bench.raw`)."""

    def read(self) -> None: ...

    def close(self) -> None: ...


def _bench(
    targets: Mapping[str, tuple[str, Callable[[], None]]],
    raw_reader: Callable[[], _Reader],
    count: int,
    reps: int,
) -> dict[str, Samples]:
    """Seed a storage per ``name -> (url, seed)``, then interleave reads over them.

    ``raw_reader`` opens the raw driver on the last (largest) database, under the key ``raw``.
    """
    with ExitStack() as stack:
        workloads: dict[str, Workload] = {}
        for name, (url, seed) in targets.items():
            storage = open_storage(url)
            stack.callback(storage.close)
            seed()
            workloads[name] = read_workload(storage)
        raw = raw_reader()
        stack.callback(raw.close)
        workloads["raw"] = lambda n: timed(raw.read, n)
        return interleave(workloads, count, reps)


def bench_reads_sqlite(small: int, large: int, count: int, reps: int) -> dict[str, Samples]:
    """Balance reads on SQLite at ``small`` and ``large`` postings.

    Keys ``small`` and ``large`` (``SqlStorage``) and ``raw`` (sqlite3 on the large file).
    """
    with tempfile.TemporaryDirectory(prefix="treasury-bench-") as tmp:
        paths = {"small": (Path(tmp) / "small.db", small), "large": (Path(tmp) / "large.db", large)}
        targets = {
            name: (sqlite_url(path.parent, path.name), partial(seed_sqlite, str(path), rows))
            for name, (path, rows) in paths.items()
        }
        return _bench(targets, lambda: RawSqliteReader(str(paths["large"][0])), count, reps)


def bench_reads_postgres(small: int, large: int, count: int, reps: int) -> dict[str, Samples]:
    """Balance reads on PostgreSQL; keys as for SQLite (``raw`` is psycopg)."""
    with postgres_schema() as small_url, postgres_schema() as large_url:
        targets = {
            "small": (small_url, partial(seed_postgres, small_url, small)),
            "large": (large_url, partial(seed_postgres, large_url, large)),
        }
        return _bench(targets, lambda: RawPostgresReader(large_url), count, reps)
