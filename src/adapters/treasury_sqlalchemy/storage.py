"""The SQLAlchemy storage adapter: SQLite by file (the default) or PostgreSQL by URL.

SQLite: WAL journal, ``synchronous=FULL`` (a committed movement survives power loss), writes
start with ``BEGIN IMMEDIATE`` so a transaction holds the write lock from its first statement
(no upgrade deadlocks), and writers in this process queue on a lock instead of spinning in
SQLite's busy handler. Readers run concurrently from the WAL snapshot.

PostgreSQL: psycopg 3, a connection pool sized like the worker threads, READ COMMITTED; ledger
rows are locked by ``UPDATE`` in sorted id order, and deadlocks or serialization failures re-run
the whole transaction function.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from treasury_core.ports.storage import Storage, UnitOfWork
from treasury_sqlalchemy.repositories import SqlUnitOfWork

# SQLSTATEs after which re-running the transaction can succeed.
_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01"})


def normalize_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` and use the psycopg 3 driver for them."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class SqlStorage(Storage):
    """Storage on SQLite or PostgreSQL through SQLAlchemy Core."""

    def __init__(self, url: str, *, pool_size: int = 8, echo: bool = False) -> None:
        super().__init__()
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.dialect = parsed.get_backend_name()
        self._pool_size = pool_size
        self._write_lock: threading.Lock | None = None
        if self.dialect == "sqlite":
            database = parsed.database or ""
            if database in ("", ":memory:"):
                raise ValueError("SqlStorage needs an SQLite file; use the memory storage instead")
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self._write_lock = threading.Lock()
            self.engine: Engine = create_engine(
                self.url,
                echo=echo,
                connect_args={"check_same_thread": False, "timeout": 30},
                pool_size=pool_size,
                max_overflow=0,
            )
            event.listen(self.engine, "connect", _sqlite_on_connect)
        elif self.dialect == "postgresql":
            self.engine = create_engine(
                self.url, echo=echo, pool_size=pool_size, max_overflow=0, pool_pre_ping=False
            )
        else:
            raise ValueError(f"unsupported database: {self.dialect} (use sqlite or postgresql)")

    @property
    def worker_threads(self) -> int:
        """As many threads as pooled connections, so no thread waits for a connection."""
        return self._pool_size

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[UnitOfWork]:
        """One transaction: commits on a clean exit, rolls back on an exception."""
        lock = self._write_lock if (write and self._write_lock is not None) else nullcontext()
        with lock, self.engine.connect() as conn:
            if self.dialect == "sqlite":
                # pysqlite runs in autocommit mode (see _sqlite_on_connect); we say when.
                conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield SqlUnitOfWork(conn, lock_rows=self.dialect == "postgresql")
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    def is_transient(self, error: BaseException) -> bool:
        """Deadlocks and serialization failures (PostgreSQL), a busy database (SQLite)."""
        if not isinstance(error, DBAPIError):
            return False
        sqlstate = getattr(error.orig, "sqlstate", None)
        if sqlstate in _TRANSIENT_SQLSTATES:
            return True
        return self.dialect == "sqlite" and "database is locked" in str(error.orig)

    def migrate(self) -> None:
        """Apply every Alembic migration not yet applied."""
        from treasury_sqlalchemy.migrate import upgrade

        upgrade(self.engine)

    def close(self) -> None:
        """Dispose of the pool and the worker threads."""
        super().close()
        self.engine.dispose()


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from pysqlite so BEGIN IMMEDIATE is ours to issue.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
    finally:
        cursor.close()
