"""The SQLAlchemy storage adapter: SQLite by file (the default) or PostgreSQL by URL.

SQLite: WAL journal, ``synchronous=FULL`` (a committed movement survives power loss), writes
start with ``BEGIN IMMEDIATE`` so a transaction holds the write lock from its first statement
(no upgrade deadlocks), and writers in this process queue on a lock instead of spinning in
SQLite's busy handler. Readers run concurrently from the WAL snapshot.

PostgreSQL: psycopg 3, READ COMMITTED; ledger rows are locked by ``UPDATE`` in sorted id order,
and deadlocks or serialization failures re-run the whole transaction function.

Each of the storage's worker threads keeps one connection for its lifetime (checking one out of
the pool per transaction cost as much client time as a statement); any other thread, such as a
caller of ``run_sync``, borrows one from the pool per transaction.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
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

    def __init__(
        self, url: str, *, pool_size: int = 8, echo: bool = False, busy_timeout: float = 30.0
    ) -> None:
        """``busy_timeout``: how long an SQLite writer waits for another process's lock."""
        super().__init__()
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.dialect = parsed.get_backend_name()
        self._pool_size = pool_size
        self._write_lock: threading.Lock | None = None
        self._local = threading.local()
        self._kept: list[Connection] = []
        self._kept_lock = threading.Lock()
        # Worker threads keep pool_size connections; the overflow serves everyone else.
        pool = {"pool_size": pool_size, "max_overflow": pool_size}
        if self.dialect == "sqlite":
            database = parsed.database or ""
            if database in ("", ":memory:"):
                raise ValueError("SqlStorage needs an SQLite file; use the memory storage instead")
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self._write_lock = threading.Lock()
            self.engine: Engine = create_engine(
                self.url,
                echo=echo,
                connect_args={"check_same_thread": False, "timeout": busy_timeout},
                **pool,
            )
            event.listen(self.engine, "connect", _sqlite_on_connect)
        elif self.dialect == "postgresql":
            self.engine = create_engine(self.url, echo=echo, **pool)
        else:
            raise ValueError(f"unsupported database: {self.dialect} (use sqlite or postgresql)")

    @property
    def worker_threads(self) -> int:
        """As many threads as pooled connections, so no thread waits for a connection."""
        return self._pool_size

    def _worker_started(self) -> None:
        self._local.keeps_connection = True

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        if not getattr(self._local, "keeps_connection", False):
            with self.engine.connect() as conn:
                yield conn
            return
        kept: Connection | None = getattr(self._local, "conn", None)
        if kept is None or kept.closed or kept.invalidated:
            kept = self._local.conn = self.engine.connect()
            with self._kept_lock:
                self._kept.append(kept)
        yield kept

    @contextmanager
    def transaction(self, *, write: bool = True, snapshot: bool = False) -> Iterator[UnitOfWork]:
        """One transaction: commits on a clean exit, rolls back on an exception.

        A ``snapshot`` read runs REPEATABLE READ on PostgreSQL; SQLite's WAL readers always see
        one snapshot from their first read on.
        """
        lock = self._write_lock if (write and self._write_lock is not None) else nullcontext()
        with lock, self._connection() as conn:
            committed = False
            try:
                # The ledger's hot path writes through the DBAPI cursor, so SQLAlchemy must be
                # told a transaction is open or its commit() would have nothing to commit.
                conn.begin()
                if self.dialect == "sqlite":
                    # pysqlite runs in autocommit mode (see _sqlite_on_connect); we say when,
                    # and take the write lock up front so a transaction never fails half way.
                    conn.connection.dbapi_connection.execute(  # type: ignore[union-attr]
                        "BEGIN IMMEDIATE" if write else "BEGIN"
                    )
                elif snapshot and not write:
                    conn.exec_driver_sql(
                        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
                    )
                yield SqlUnitOfWork(conn, lock_rows=self.dialect == "postgresql")
                conn.commit()
                committed = True
            finally:
                if not committed:
                    # Whatever failed (BEGIN, the work, COMMIT), the connection must leave here
                    # outside any transaction, or a kept connection would poison its thread.
                    self._abandon(conn)

    def _abandon(self, conn: Connection) -> None:
        try:
            conn.rollback()
            dbapi = conn.connection.dbapi_connection
            if self.dialect == "sqlite" and dbapi is not None and dbapi.in_transaction:
                dbapi.rollback()  # a failed COMMIT leaves pysqlite's own transaction open
        except Exception:
            conn.invalidate()
            if getattr(self._local, "conn", None) is conn:
                self._local.conn = None

    def is_transient(self, error: BaseException) -> bool:
        """Deadlocks and serialization failures (PostgreSQL), a busy database (SQLite)."""
        # Errors from the DBAPI cursor (the ledger's hot path) arrive unwrapped.
        orig = error.orig if isinstance(error, DBAPIError) else error
        if getattr(orig, "sqlstate", None) in _TRANSIENT_SQLSTATES:
            return True
        return isinstance(orig, sqlite3.OperationalError) and "database is locked" in str(orig)

    def migrate(self) -> None:
        """Apply every Alembic migration not yet applied."""
        from treasury_sqlalchemy.migrate import upgrade

        upgrade(self.engine)

    def close(self) -> None:
        """Stop the worker threads, close their connections, dispose of the pool."""
        super().close()
        with self._kept_lock:
            kept, self._kept = self._kept, []
        for conn in kept:
            conn.close()
        self.engine.dispose()


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from pysqlite so BEGIN IMMEDIATE is ours to issue.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()
