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

Group commit (SQLite): SQLite has one writer and every commit waits for the disk (``FULL``), so
the commits, not the work, set the pace. Writes submitted through :meth:`SqlStorage.run` go to
one writer thread, which runs whatever is queued in one transaction: optimistically one function
after another, and, if one raises, the whole group again with each function inside its own
``SAVEPOINT``, so that only the failing one is rolled back. Nobody is answered before the one
``COMMIT`` is durable. Each operation stays all-or-nothing and durable
when acknowledged; a burst of N writes costs one disk flush instead of N. An idle writer takes a
single request at once, so nothing waits for a batch to fill. WAL checkpoints run on a companion
thread every 0.2 s (``PASSIVE``: they block nobody) instead of inside whichever commit crosses
SQLite's 1,000-page mark, where they stalled a whole group.

Where a group's functions run: the writer thread takes the write lock, begins, and then hands
the functions to their callers' event loop, which runs them as one callback while the writer
waits; the writer then commits and answers. The functions are Python and so is the loop's own
work, so run on the writer thread they contended with the loop for the GIL at every SQLite call
(see :class:`_LoopTurn`); the writer thread keeps what releases the GIL (the lock, ``BEGIN
IMMEDIATE``, the durable ``COMMIT``). A loop that does not take its turn within
:data:`LOOP_GRACE_SECONDS` (blocked or stopped; a closed loop at once) has its group run on the
writer thread, as a lone write always is, and so are groups holding background work (made
inside :func:`treasury_core.ports.background_writes`: jobs, fan-out, purges, which may be long).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from treasury_core.ports.storage import Storage, UnitOfWork, in_background
from treasury_sqlalchemy.clock import SqlClockOffsets
from treasury_sqlalchemy.repositories import SqlUnitOfWork
from treasury_sqlalchemy.stripes import POSTGRES_STRIPES, StripedAccounts

T = TypeVar("T")

log = logging.getLogger("treasury.storage")

#: At most this many functions share one SQLite commit.
MAX_GROUP = 64

#: How long the group writer waits for its callers' event loop to take up a group's functions
#: before running them on its own thread (a loop under load takes them within milliseconds).
LOOP_GRACE_SECONDS = 0.05

#: How often the group writer's companion copies the WAL back into the database file.
CHECKPOINT_SECONDS = 0.2
#: WAL size (pages) at which a commit checkpoints by itself when no companion does.
SAFETY_NET_CHECKPOINT_PAGES = 10_000

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
        self,
        url: str,
        *,
        pool_size: int = 8,
        echo: bool = False,
        busy_timeout: float = 30.0,
        group_commit: bool = True,
        hot_stripes: int | None = None,
    ) -> None:
        """``busy_timeout``: how long an SQLite writer waits for another process's lock;
        ``group_commit``: let concurrent SQLite writes share commits (see the module);
        ``hot_stripes``: stripes per account never checked for funds (see stripes.py; default
        :data:`~treasury_sqlalchemy.stripes.POSTGRES_STRIPES` on PostgreSQL, none on SQLite,
        whose one writer at a time gains nothing from them)."""
        super().__init__()
        self._group_commit = group_commit
        self._busy_timeout = busy_timeout
        self._writer: _GroupWriter | None = None
        self._writer_lock = threading.Lock()
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
            directory = Path(database).expanduser().parent
            # A mistyped path must not quietly become a new, empty database in a new directory.
            if not directory.is_dir():
                raise ValueError(
                    f"the directory of the SQLite database does not exist: {directory}"
                )
            self._write_lock = threading.Lock()
            self.engine: Engine = create_engine(
                self.url,
                echo=echo,
                connect_args={"check_same_thread": False, "timeout": busy_timeout},
                **pool,
            )
            event.listen(self.engine, "connect", _sqlite_on_connect)
        elif self.dialect == "postgresql":
            try:
                self.engine = create_engine(self.url, echo=echo, **pool)
            except ModuleNotFoundError as exc:
                if not (exc.name or "").startswith("psycopg"):
                    raise
                # SQLAlchemy imports the driver here; say which extra brings it.
                raise ModuleNotFoundError(
                    "PostgreSQL needs the psycopg driver: pip install 'treasury-core[postgres]'",
                    name=exc.name,
                ) from exc
        else:
            raise ValueError(f"unsupported database: {self.dialect} (use sqlite or postgresql)")
        if hot_stripes is None:
            hot_stripes = POSTGRES_STRIPES if self.dialect == "postgresql" else 0
        self.striped = StripedAccounts(hot_stripes)
        event.listen(self.engine, "connect", self.striped.on_connect)

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
        self._refuse_nesting()
        if not write and self.dialect == "sqlite":
            with self._sqlite_read() as uow:
                yield uow
            return
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

    @contextmanager
    def _sqlite_read(self) -> Iterator[UnitOfWork]:
        """An SQLite read: ``BEGIN`` (deferred: a WAL snapshot from the first read on) and a
        ``ROLLBACK`` at the end, on the DBAPI connection.

        A read changes nothing, so it needs none of SQLAlchemy's transaction bookkeeping, which
        cost as much as the read itself on the request path. A statement a repository runs
        through SQLAlchemy autobegins its side, which is ended here too.
        """
        with self._connection() as conn:
            dbapi = conn.connection.dbapi_connection
            assert dbapi is not None
            dbapi.execute("BEGIN")
            try:
                yield SqlUnitOfWork(conn, lock_rows=False)
            finally:
                self._end_read(conn, dbapi)

    def _end_read(self, conn: Connection, dbapi: Any) -> None:
        try:
            if conn.in_transaction():
                conn.rollback()
            if dbapi.in_transaction:
                dbapi.execute("ROLLBACK")
        except Exception:
            self._abandon(conn)

    def _read_here(self, fn: Callable[[UnitOfWork], T]) -> T:
        """``run_sync(fn, write=False)`` on the connection this thread keeps, its ``BEGIN``
        and ``ROLLBACK`` written out.

        The same transaction as :meth:`_sqlite_read` and the same retry rule as ``run_sync``,
        without the three context managers around it (``run_sync``'s ``transaction()``, the
        read, the connection), which cost a quarter of a read that finds its row in the page
        cache; every API request makes one or more reads.
        """

        def attempt() -> T:
            conn: Connection | None = getattr(self._local, "conn", None)
            if conn is None or conn.closed or conn.invalidated:
                self._local.keeps_connection = True
                with self.transaction(write=False) as uow:  # connects, and keeps it
                    return fn(uow)
            dbapi = conn.connection.dbapi_connection
            try:
                dbapi.execute("BEGIN")  # type: ignore[union-attr]
                return fn(SqlUnitOfWork(conn, lock_rows=False))
            finally:
                self._end_read(conn, dbapi)

        return self._retrying(attempt)

    def run_sync(
        self, fn: Callable[[UnitOfWork], T], *, write: bool = True, snapshot: bool = False
    ) -> T:
        """As :meth:`Storage.run_sync`; a write on a thread that keeps its connection (the
        group writer, the worker threads, and the event loop's thread once it has read) takes
        :meth:`_write_here`'s shorter path."""
        if not write:
            return super().run_sync(fn, write=write, snapshot=snapshot)
        self._refuse_nesting()

        def attempt() -> T:
            # Looked up on every attempt: a failure may have given the connection up.
            conn: Connection | None = getattr(self._local, "conn", None)
            if conn is None or conn.closed or conn.invalidated:
                with self.transaction(write=True) as uow:  # connects (and keeps, if it does)
                    return fn(uow)
            return self._write_here(conn, fn)

        return self._retrying(attempt)

    def _write_here(self, conn: Connection, fn: Callable[[UnitOfWork], T]) -> T:
        """One write transaction on this thread's kept connection, begun and committed on the
        driver's connection, without SQLAlchemy's transaction around it.

        The same transaction as :meth:`transaction` (``BEGIN IMMEDIATE`` on SQLite, under the
        in-process write lock; on PostgreSQL psycopg begins at the first statement), for less
        bookkeeping than :meth:`transaction`'s, which every write that is not part of a group
        pays (a transfer awaited on its own, every PostgreSQL write). A repository statement
        run through SQLAlchemy has begun SQLAlchemy's side of the transaction, which then
        commits it; otherwise the driver commits. Whatever fails, the connection leaves outside
        any transaction.
        """
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        sqlite = self.dialect == "sqlite"
        lock = self._write_lock if self._write_lock is not None else nullcontext()
        with lock:
            committed = False
            self._local.writing = True
            try:
                if sqlite:
                    dbapi.execute("BEGIN IMMEDIATE")
                value = fn(SqlUnitOfWork(conn, lock_rows=not sqlite))
                if conn.in_transaction():
                    conn.commit()
                else:
                    dbapi.commit()
                committed = True
                return value
            finally:
                self._local.writing = False
                if not committed:
                    self._abandon(conn)

    def _refuse_nesting(self) -> None:
        """A function run by :meth:`_write_here` must not start another transaction (the
        storage port's rule). On this thread it would share the kept connection: SQLAlchemy
        knows nothing of the open transaction, so a nested write would commit the outer one's
        rows half way, and a nested read would end it. Refused instead, loudly."""
        if getattr(self._local, "writing", False):
            raise RuntimeError(
                "a storage function started another transaction inside its own; a function "
                "must do all its work through the unit of work it is given"
            )

    def _abandon(self, conn: Connection) -> None:
        try:
            conn.rollback()
            dbapi = conn.connection.dbapi_connection
            if dbapi is not None and (self.dialect == "postgresql" or dbapi.in_transaction):
                # A failed COMMIT leaves pysqlite's own transaction open, and a write begun on
                # psycopg's connection directly is unknown to SQLAlchemy (_write_here).
                dbapi.rollback()
        except Exception:
            conn.invalidate()
            if getattr(self._local, "conn", None) is conn:
                self._local.conn = None

    async def run(
        self, fn: Callable[[UnitOfWork], T], *, write: bool = True, snapshot: bool = False
    ) -> T:
        """As :meth:`Storage.run`; on SQLite, writes go through the group-commit writer and
        reads run inline.

        An SQLite read is a few B-tree lookups in this process's page cache, never waiting on a
        writer (WAL), so a hop to a worker thread would cost more than the read itself.
        """
        if self._write_lock is None:
            return await super().run(fn, write=write, snapshot=snapshot)
        if not write:
            # On the loop's thread, which keeps one connection (snapshot: every SQLite read is),
            # between two suspension points. The one after the read is what callers expect of
            # an await: a task that reads in a loop must not starve the others (or the writes
            # it is waiting to see). The one before it stages a burst of requests: every ready
            # request reaches its read before any runs, then the reads run back to back, then
            # the responses are written back to back. Each stage keeps its code and data warm
            # for the next request's turn, which costs less CPU per request over HTTP than
            # reading at once (either suspension alone gained nothing).
            await asyncio.sleep(0)
            result = self._read_here(fn)
            await asyncio.sleep(0)
            return result
        if not self._group_commit:
            return await super().run(fn, write=write, snapshot=snapshot)
        writer = self._writer
        if writer is None:
            with self._writer_lock:
                writer = self._writer
                if writer is None:
                    writer = self._writer = _GroupWriter(self)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        writer.submit(_Pending(fn, future, loop, on_loop=not in_background()))
        return await future

    def run_group(self, batch: list[_Pending]) -> None:
        """Run ``batch`` in one SQLite transaction and answer each function after the commit.

        Optimistic: the functions run one after another with no savepoints, which is right
        whenever none of them raises. If one does, the whole transaction is rolled back and the
        batch runs again with a ``SAVEPOINT`` around each function, so only the failing ones
        are undone (functions may be run more than once: the port's contract). If the
        transaction itself fails (BEGIN or COMMIT), nothing of it is durable and each function
        is run again on its own, with the usual retries.
        """
        if len(batch) == 1:
            self._run_alone(batch[0])
            return
        try:
            try:
                outcomes = self._group(batch, savepoints=False)
            except _OneFailed:
                outcomes = self._group(batch, savepoints=True)
        except Exception:
            log.warning("a group commit failed; running its %d writes one by one", len(batch))
            for item in batch:
                self._run_alone(item)
            return
        _settle_all(list(zip(batch, outcomes, strict=True)))

    def _run_alone(self, item: _Pending) -> None:
        try:
            value = self.run_sync(item.fn)
        except Exception as exc:
            item.settle(False, exc)
        else:
            item.settle(True, value)

    def _group(self, batch: list[_Pending], *, savepoints: bool) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = []
        with self.transaction(write=True) as uow:
            assert isinstance(uow, SqlUnitOfWork)
            conn = uow.connection

            def run_functions() -> None:
                for item in batch:
                    if not savepoints:
                        try:
                            outcomes.append((True, item.fn(SqlUnitOfWork(conn, lock_rows=False))))
                        except Exception as exc:
                            raise _OneFailed from exc
                        continue
                    savepoint = conn.begin_nested()
                    try:
                        value = item.fn(SqlUnitOfWork(conn, lock_rows=False))
                    except Exception as exc:
                        savepoint.rollback()
                        outcomes.append((False, exc))
                    else:
                        savepoint.commit()
                        outcomes.append((True, value))

            loop = batch[0].loop
            if all(item.loop is loop and item.on_loop for item in batch):
                _LoopTurn(run_functions).run(loop, LOOP_GRACE_SECONDS)
            else:
                # Background work (a purge may take a while: the loop must go on serving), or
                # callers on several loops (rare: no one loop can run it for the others).
                run_functions()
        return outcomes

    def checkpoint(self, connection: sqlite3.Connection | None = None) -> tuple[int, int, int]:
        """Copy committed WAL frames into the database file without blocking anyone (SQLite's
        ``PASSIVE`` checkpoint); SQLite's answer ``(busy, frames in the WAL, frames copied)``.

        On ``connection`` if given (the checkpointer's own), else on one from the pool.
        """
        if connection is not None:
            row = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        else:
            with self.engine.connect() as conn:
                dbapi = conn.connection.dbapi_connection
                assert dbapi is not None
                row = dbapi.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    def checkpoint_connection(self) -> sqlite3.Connection:
        """A connection of its own for the checkpointer, outside the pool: with a small pool
        every pooled connection can be kept by a thread (the writer, the loop's reads), and a
        checkpointer waiting for one would never run."""
        # The arguments SQLAlchemy itself connects with (the file, or a file: URI), so both
        # open the same database.
        args, kwargs = self.engine.dialect.create_connect_args(self.engine.url)
        options: dict[str, Any] = {**kwargs, "check_same_thread": False}
        options["timeout"] = self._busy_timeout
        connection: sqlite3.Connection = sqlite3.connect(*args, **options)  # type: ignore[call-overload]
        _sqlite_on_connect(connection, None)
        return connection

    def is_transient(self, error: BaseException) -> bool:
        """Deadlocks and serialization failures (PostgreSQL), a busy database (SQLite)."""
        # Errors from the DBAPI cursor (the ledger's hot path) arrive unwrapped.
        orig = error.orig if isinstance(error, DBAPIError) else error
        if getattr(orig, "sqlstate", None) in _TRANSIENT_SQLSTATES:
            return True
        return isinstance(orig, sqlite3.OperationalError) and "database is locked" in str(orig)

    def clock_offsets(self) -> SqlClockOffsets:
        """The sandbox clock's offset, in the ``clock_offsets`` table."""
        return SqlClockOffsets(self)

    def migrate(self) -> None:
        """Apply every Alembic migration not yet applied."""
        from treasury_sqlalchemy.migrate import upgrade

        upgrade(self.engine)

    def close(self) -> None:
        """Stop the writer and worker threads, close their connections, dispose of the pool."""
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.stop()
        super().close()
        with self._kept_lock:
            kept, self._kept = self._kept, []
        for conn in kept:
            conn.close()
        self.engine.dispose()


class _OneFailed(Exception):
    """A function of an optimistic group raised: run the group again with savepoints."""


class _LoopTurn:
    """A group's functions, run on their callers' event loop thread while the writer thread
    waits, or on the writer thread if that loop does not take them up in time.

    Why: the functions are Python (building rows, rendering JSON), and the loop thread is busy
    with Python too (HTTP, handlers), so run on the writer thread they fight the loop for the
    GIL: every SQLite call releases it and the writer must win it back from a busy loop, which
    cost more CPU than the functions themselves. Run on the loop, they take their turn like any
    other callback, and the writer thread keeps only the waits that release the GIL: the write
    lock, ``BEGIN IMMEDIATE`` and the durable ``COMMIT``.

    Whichever thread claims the turn first runs it, exactly once. The writer claims it when the
    loop has not started it within the grace period (a loop blocked in a synchronous call, one
    that stopped, or one waiting for this very commit; a closed loop at once), so no group waits
    long on a loop that cannot start it; it is then run as it always could be, on the writer
    thread. Once the loop has started the turn, the writer waits for its end: the functions must
    not wait on the loop themselves (the storage port's rule).
    """

    __slots__ = ("_claimed", "_done", "_error", "_fn", "_lock")

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._claimed = False
        self._done = threading.Event()
        self._error: BaseException | None = None

    def _claim(self) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def _run(self) -> None:
        try:
            self._fn()
        except BaseException as exc:  # handed to the writer thread, which answers the callers
            self._error = exc
        finally:
            self._done.set()

    def _on_loop(self) -> None:
        if self._claim():
            self._run()
            # An interrupt or exit raised on the loop's thread (a signal handler's
            # KeyboardInterrupt) must stop the loop as it would anywhere else, not only fail the
            # group's callers.
            if isinstance(self._error, (KeyboardInterrupt, SystemExit)):
                raise self._error

    def run(self, loop: asyncio.AbstractEventLoop, grace: float) -> None:
        """Run the functions (on ``loop`` if it takes them within ``grace`` seconds, else
        here) and return once they have; re-raise what they raised."""
        try:
            loop.call_soon_threadsafe(self._on_loop)
        except RuntimeError:  # a closed loop
            pass
        else:
            self._done.wait(grace)
        if self._claim():
            self._run()
        else:
            self._done.wait()  # claimed by the loop: it runs to the end without waiting
        if self._error is not None:
            raise self._error


class _Pending:
    """A write waiting for the group writer, and where to send its outcome; ``on_loop``: its
    function may run on the caller's loop (not background work, see ``background_writes``)."""

    __slots__ = ("fn", "future", "loop", "on_loop", "settled")

    def __init__(
        self, fn: Callable[[UnitOfWork], Any], future: Any, loop: Any, *, on_loop: bool = True
    ) -> None:
        self.fn = fn
        self.future = future
        self.loop = loop
        self.on_loop = on_loop
        self.settled = False

    def settle(self, ok: bool, value: Any) -> None:
        """Hand the outcome to the waiting coroutine, on its own event loop (once)."""
        _settle_all([(self, (ok, value))])

    def deliver(self, ok: bool, value: Any) -> None:
        """On the caller's loop: resolve the future, unless the caller was cancelled."""
        if self.future.done():
            return
        if ok:
            self.future.set_result(value)
        else:
            self.future.set_exception(value)


def _settle_all(outcomes: list[tuple[_Pending, tuple[bool, Any]]]) -> None:
    """Answer a group's callers with one wake-up per event loop rather than one per caller."""
    by_loop: dict[Any, list[tuple[_Pending, tuple[bool, Any]]]] = {}
    for item, outcome in outcomes:
        if not item.settled:
            item.settled = True
            by_loop.setdefault(item.loop, []).append((item, outcome))
    for loop, items in by_loop.items():

        def deliver(items: list[tuple[_Pending, tuple[bool, Any]]] = items) -> None:
            for item, (ok, value) in items:
                item.deliver(ok, value)

        # A closed loop means nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(deliver)


class _GroupWriter:
    """The one thread that runs SQLite writes submitted with ``run``, a queue-full at a time."""

    def __init__(self, storage: SqlStorage) -> None:
        self._storage = storage
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._loop, name="treasury-group-writer", daemon=True
        )
        self._thread.start()
        # A checkpoint inside a commit stalls every caller of that group for as long as it
        # takes to copy the WAL and flush the database file: run them beside the writer.
        self._stopped = threading.Event()
        self._checkpointer = threading.Thread(
            target=self._checkpoints, name="treasury-checkpointer", daemon=True
        )
        self._checkpointer.start()

    def _checkpoints(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while not self._stopped.wait(CHECKPOINT_SECONDS):
                try:
                    if connection is None:
                        connection = self._storage.checkpoint_connection()
                    self._storage.checkpoint(connection)
                except Exception:  # a busy or vanished file: try again on the next tick
                    log.debug("checkpoint skipped", exc_info=True)
        finally:
            if connection is not None:
                connection.close()

    @property
    def threads(self) -> tuple[threading.Thread, ...]:
        """The writer and its checkpointer (for tests and diagnostics)."""
        return self._thread, self._checkpointer

    def submit(self, item: _Pending) -> None:
        self._queue.put(item)

    def stop(self) -> None:
        self._stopped.set()
        self._checkpointer.join()
        self._queue.put(None)
        self._thread.join()
        # A write submitted while the writer was stopping is refused, not left waiting.
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item.settle(False, RuntimeError("the storage is closed"))

    def _loop(self) -> None:
        self._storage._worker_started()  # keep one connection, as the workers do
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stopping = False
            while len(batch) < MAX_GROUP:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            try:
                self._storage.run_group(batch)
            except BaseException as exc:
                # Whatever escaped (a BaseException from a function), every caller of the
                # group gets an answer and the writer lives on for the next ones.
                for item in batch:
                    item.settle(False, exc)
            if stopping:
                return


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from pysqlite so BEGIN IMMEDIATE is ours to issue.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Checkpoints run beside the writer (see _GroupWriter); this is only the safety net for
        # a process that never starts one, instead of SQLite's every 1,000 pages inside a commit.
        cursor.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_CHECKPOINT_PAGES}")
    finally:
        cursor.close()
