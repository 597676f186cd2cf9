"""Shared fixtures: the two ledger accounts, journals, temp SQLite files, private PG schemas."""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from treasury_core.ledger import Account, AccountKind, Journal, Move
from treasury_core.ports.storage import UnitOfWork
from treasury_sqlalchemy.storage import SqlStorage

#: Where PostgreSQL is; the PostgreSQL rows are skipped when it cannot be reached.
POSTGRES_URL = os.environ.get(
    "TREASURY_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)

#: Every movement happens at this instant (the kernel takes time as an argument).
NOW = datetime(2025, 1, 1, tzinfo=UTC)
#: ``NOW`` as SQLAlchemy stores a ``DateTime`` on SQLite (naive UTC text).
NOW_SQLITE = NOW.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")

SOURCE = Account(id="world:USD", currency="USD", kind=AccountKind.WORLD)
WALLET = Account(
    id="wallet:bench", currency="USD", kind=AccountKind.WALLET, company_id=1, guarded=True
)
#: The two account ids in the order a movement locks them (sorted).
LOCK_ORDER = tuple(sorted((SOURCE.id, WALLET.id)))


class JournalIds:
    """Unique journal ids for one database (``<prefix>-<n>``), so repetitions never collide."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._counter = itertools.count()

    def next(self) -> str:
        """A fresh journal id."""
        return f"{self._prefix}-{next(self._counter)}"


def movement(journal_id: str, amount: int = 1) -> Journal:
    """A two-account movement: ``amount`` from the unguarded world account into the wallet."""
    return Journal(id=journal_id, legs=(Move(SOURCE.id, WALLET.id, "USD", amount),))


def open_storage(url: str) -> SqlStorage:
    """A migrated ``SqlStorage`` on one connection with the two benchmark accounts opened."""
    storage = SqlStorage(url, pool_size=1)
    storage.migrate()

    def open_accounts(uow: UnitOfWork) -> None:
        for account in (SOURCE, WALLET):
            uow.ledger.open_account(account)

    storage.run_sync(open_accounts)
    return storage


def sqlite_url(directory: Path, name: str) -> str:
    """The URL of an SQLite file ``name`` in ``directory``."""
    return f"sqlite:///{directory / name}"


def with_search_path(url: str, schema: str) -> str:
    """``url`` with the libpq ``options`` that put ``schema`` first on the search path."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=-csearch_path%3D{schema}"


def postgres_available(url: str = POSTGRES_URL) -> str | None:
    """``None`` if PostgreSQL at ``url`` answers, else why not (one line)."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    return None


@contextmanager
def postgres_schema(url: str = POSTGRES_URL) -> Iterator[str]:
    """A private schema ``bench_<random>``; yields a URL that uses it, drops it afterwards."""
    import psycopg

    name = f"bench_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield with_search_path(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")
