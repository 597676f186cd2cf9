"""Wallet transactions and statements as the history grows (issue 23, part 3).

Two databases per backend hold one wallet's history, ``small`` and ``large`` postings long, and
the same three reads alternate between them through :class:`WalletStatementService` (the code
the HTTP routes call, less the HTTP layer):

- the newest page of 100 transactions;
- a page of 100 from the middle of the history (``starting_after`` a transaction there);
- the statement of one month (February 2025), which holds the same ``MONTH`` transactions in
  both histories; a quarter of the rest comes before it, three quarters after it.

Seeding: going through the services costs about a millisecond a movement, so a million would
take most of half an hour. Instead each journal is planned by the ledger kernel
(``plan_journal``), its history entries made by the same function the storage adapters call
(``wallet_entries``), and postings and entries are bulk-inserted into the migrated schema
(``executemany`` on SQLite, ``COPY`` on PostgreSQL), with the account counters set to the
fold. A check then reads the history back through the service: the newest entry's figures are
the account's, and the month's statement closes on its opening plus its movements.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy.dialects.postgresql import psycopg as postgresql_dialect
from sqlalchemy.dialects.sqlite import pysqlite as sqlite_dialect
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, DropIndex

from bench.fixtures import POSTGRES_URL, postgres_schema, sqlite_url
from bench.report import Row, cost, cpu, ratio, verdict
from bench.timing import Samples, Workload, interleave, timed
from treasury_core.ledger import (
    Account,
    AccountKind,
    EntryCounter,
    EntryPosition,
    Journal,
    Move,
    Posting,
    WalletEntry,
    apply_plan,
    plan_journal,
    wallet_entries,
)
from treasury_core.pagination import PageRequest
from treasury_core.ports.storage import UnitOfWork
from treasury_core.services.movements.statements import WalletStatementService
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.storage import SqlStorage

COMPANY = 1
WALLET = Account("wal_BENCH", "USD", AccountKind.WALLET, COMPANY, guarded=True)
WORLD = Account("world:USD", "USD", AccountKind.WORLD)
FEES = Account("fees:USD", "USD", AccountKind.FEES)
#: Transactions in the measured month, whatever the history's length.
MONTH = 500
MONTH_START = datetime(2025, 2, 1, tzinfo=UTC)
MONTH_END = datetime(2025, 3, 1, tzinfo=UTC)
_EARLIEST = datetime(2015, 1, 1, tzinfo=UTC)
_LATEST = datetime(2035, 1, 1, tzinfo=UTC)
#: The target: each read at ``large`` within this multiple of the same at ``small``.
TARGET = 1.5
PAGE = 100


def _times(count: int) -> Iterator[datetime]:
    """``count`` increasing instants: a quarter of the rest before the month, ``MONTH`` in it,
    the remainder after it."""
    rest = max(0, count - MONTH)
    before, in_month = rest // 4, min(count, MONTH)
    after = count - before - in_month
    for start, end, k in (
        (_EARLIEST, MONTH_START, before),
        (MONTH_START, MONTH_END, in_month),
        (MONTH_END, _LATEST, after),
    ):
        step = (end - start) / max(k, 1)
        for i in range(k):
            yield start + step * i


#: A repeating day of business: two credits, a debit out, a fee.
_PATTERN = (
    ("virtual_account_credit", WORLD.id, WALLET.id, 3),
    ("virtual_account_credit", WORLD.id, WALLET.id, 3),
    ("withdrawal", WALLET.id, WORLD.id, 2),
    ("withdrawal", WALLET.id, FEES.id, 1),
)


@dataclass(slots=True)
class History:
    """What seeding wrote: how many journals, the wallet's final balance, its counters, and the
    id of one transaction from the middle of the history."""

    count: int
    balance: int
    #: ``id -> (debits_posted, credits_posted)`` after the whole history.
    counters: dict[str, tuple[int, int]]
    middle: str = ""


#: Takes a posting's row (``_POSTING_COLUMNS`` but ``released`` and ``created_at``) and its
#: wallet entry's row (``_ENTRY_COLUMNS``, ``created_at`` an aware datetime).
Sink = Callable[[tuple[Any, ...], tuple[Any, ...]], None]


def planned_history(count: int, sink: Sink) -> History:
    """The history journal by journal through the kernel (``plan_journal``, ``apply_plan``)
    and ``wallet_entries``: the reference :func:`fast_history` must equal (tested at a small
    size; at a million journals this takes minutes on a shared machine)."""
    accounts = {a.id: a for a in (WALLET, WORLD, FEES)}
    middle, last = "", None
    for n, at in enumerate(_times(count)):
        operation, debit, credit, amount = _PATTERN[n % len(_PATTERN)]
        journal = Journal(f"jr_{n:012d}", (Move(debit, credit, "USD", amount),), operation)
        plan = plan_journal(journal, {}, at)
        accounts.update(apply_plan(accounts, plan))
        [entry] = wallet_entries(plan, accounts, {WALLET.id: last})
        last = EntryPosition(entry.created_at, entry.seq)
        sink(_posting_row(plan.postings[0], operation), entry_row(entry))
        if n == count // 2:
            middle = entry.id
    counters = {i: (a.debits_posted, a.credits_posted) for i, a in accounts.items()}
    return History(count, accounts[WALLET.id].balance, counters, middle)


def fast_history(count: int, sink: Sink) -> History:
    """The same rows as :func:`planned_history`, made from one planned cycle of
    :data:`_PATTERN`: journal ``n`` is the cycle's journal ``n % 4`` with its figures moved by
    what the whole cycles before it added, and its own ids, sequence number and time."""
    cycle: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    planned_history(len(_PATTERN), lambda posting, entry: cycle.append((posting, entry)))
    per_cycle = cycle[-1][1][9]  # the balance after one whole cycle
    counters = {a.id: [0, 0] for a in (WALLET, WORLD, FEES)}
    balance, middle = 0, ""
    for n, at in enumerate(_times(count)):
        turn, index = divmod(n, len(_PATTERN))
        posting, entry = cycle[index]
        journal_id = f"jr_{n:012d}"
        posting_id = f"{journal_id}.0"
        shift = turn * per_cycle
        balance = entry[9] + shift
        txn = f"txn_{n:012d}x0"
        sink(
            (posting_id, journal_id, *posting[2:]),
            (
                *entry[:1],
                txn,
                n + 1,
                posting_id,
                journal_id,
                *entry[5:9],
                balance,
                entry[10] + shift,
                entry[11],
                journal_id,
                at,
            ),
        )
        _, _, _, _, debit, credit, _, amount = posting
        counters[debit][0] += amount
        counters[credit][1] += amount
        if n == count // 2:
            middle = txn
    return History(count, balance, {i: (d, c) for i, (d, c) in counters.items()}, middle)


def entry_row(entry: WalletEntry) -> tuple[Any, ...]:
    """An entry as its ``wallet_entries`` row (``created_at`` left an aware datetime)."""
    return (
        entry.wallet_id,
        entry.id,
        entry.seq,
        entry.posting_id,
        entry.journal_id,
        entry.type.value,
        entry.counter.value,
        entry.amount,
        entry.currency,
        entry.balance_after,
        entry.available_balance_after,
        entry.pending_in_after,
        entry.source_id,
        entry.created_at,
    )


def _posting_row(posting: Posting, operation: str) -> tuple[Any, ...]:
    return (
        posting.id,
        posting.journal_id,
        operation,
        posting.kind.value,
        posting.debit_account_id,
        posting.credit_account_id,
        posting.currency,
        posting.amount,
    )


_POSTING_COLUMNS = (
    "id, journal_id, operation, kind, debit_account_id, credit_account_id, currency, amount,"
    " released, created_at"
)
_ENTRY_COLUMNS = (
    "wallet_id, id, seq, posting_id, journal_id, type, counter, amount, currency,"
    " balance_after, available_balance_after, pending_in_after, source_id, created_at"
)


def _set_counters(execute: Callable[[str, tuple[Any, ...]], object], mark: str, h: History) -> None:
    for account_id, (debits, credits) in h.counters.items():
        execute(
            f"UPDATE ledger_accounts SET debits_posted = {mark}, credits_posted = {mark}"
            f" WHERE id = {mark}",
            (debits, credits, account_id),
        )


def _index_ddl(dialect: Dialect) -> tuple[list[str], list[str]]:
    """``DROP`` and ``CREATE`` statements of ``wallet_entries``' secondary indexes: a bulk load
    builds them once afterwards rather than row by row (the schema ends up the same)."""
    indexes = sorted(t.wallet_entries.indexes, key=lambda i: str(i.name))
    drops = [str(DropIndex(i).compile(dialect=dialect)) for i in indexes]
    creates = [str(CreateIndex(i).compile(dialect=dialect)) for i in indexes]
    return drops, creates


def seed_sqlite(path: str, count: int, wallet_id: str = WALLET.id) -> History:
    """Write a ``count``-posting history into the migrated SQLite file at ``path``, of the
    wallet ``wallet_id`` (a USD wallet whose ledger account exists, as do ``world:USD`` and
    ``fees:USD``; :data:`WALLET`'s by default); the returned counters are keyed by account."""
    drops, creates = _index_ddl(sqlite_dialect.dialect())
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # A scratch database: a crash mid-seed loses nothing worth an fsync.
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN IMMEDIATE")
        for ddl in drops:
            conn.execute(ddl)
        postings: list[tuple[Any, ...]] = []
        entries: list[tuple[Any, ...]] = []

        def flush() -> None:
            conn.executemany(
                f"INSERT INTO ledger_postings ({_POSTING_COLUMNS}) VALUES ({', '.join('?' * 10)})",
                postings,
            )
            conn.executemany(
                f"INSERT INTO wallet_entries ({_ENTRY_COLUMNS}) VALUES ({', '.join('?' * 14)})",
                entries,
            )
            postings.clear()
            entries.clear()

        def sink(posting: tuple[Any, ...], entry: tuple[Any, ...]) -> None:
            # SQLAlchemy's SQLite text for a UTC timestamp (what UtcDateTime stores).
            at = entry[-1].replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
            if wallet_id != WALLET.id:
                posting = tuple(wallet_id if v == WALLET.id else v for v in posting)
                entry = (wallet_id, *entry[1:])
            postings.append((*posting, 0, at))
            entries.append((*entry[:-1], at))
            if len(postings) >= 50_000:
                flush()

        history = fast_history(count, sink)
        flush()
        for ddl in creates:
            conn.execute(ddl)
        if wallet_id != WALLET.id:
            history.counters[wallet_id] = history.counters.pop(WALLET.id)
        _set_counters(conn.execute, "?", history)
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()
    return history


def seed_postgres(url: str, count: int) -> History:
    """Like :func:`seed_sqlite`, with ``COPY``: entries and postings stream side by side over two
    connections (one ``COPY`` at a time each), so no table's rows are held in memory."""
    import psycopg

    # SQLAlchemy leaves this constructor unannotated.
    drops, creates = _index_ddl(postgresql_dialect.dialect())  # type: ignore[no-untyped-call]
    with psycopg.connect(url) as entries_conn, psycopg.connect(url) as postings_conn:
        for ddl in drops:
            entries_conn.execute(ddl)
        with (
            entries_conn.cursor() as entries_cur,
            postings_conn.cursor() as postings_cur,
            entries_cur.copy(f"COPY wallet_entries ({_ENTRY_COLUMNS}) FROM STDIN") as entries,
            postings_cur.copy(f"COPY ledger_postings ({_POSTING_COLUMNS}) FROM STDIN") as postings,
        ):

            def sink(posting: tuple[Any, ...], entry: tuple[Any, ...]) -> None:
                entries.write_row(entry)
                postings.write_row((*posting, 0, entry[-1]))

            history = fast_history(count, sink)
        postings_conn.commit()
        for ddl in creates:
            entries_conn.execute(ddl)
        with entries_conn.cursor() as cur:
            _set_counters(cur.execute, "%s", history)
        entries_conn.commit()
        entries_conn.autocommit = True
        entries_conn.execute("VACUUM ANALYZE wallet_entries")
        entries_conn.execute("VACUUM ANALYZE ledger_postings")
    return history


def open_storage(url: str) -> SqlStorage:
    """A migrated storage on one connection with the benchmark's three accounts opened."""
    storage = SqlStorage(url, pool_size=1)
    storage.migrate()

    def open_accounts(uow: UnitOfWork) -> None:
        for account in (WALLET, WORLD, FEES):
            uow.ledger.open_account(account)

    storage.run_sync(open_accounts)
    return storage


@dataclass(frozen=True, slots=True)
class Reads:
    """The three timed reads of one seeded database."""

    page: Workload
    middle: Workload
    month: Workload


def reads(storage: SqlStorage, history: History, loop: asyncio.AbstractEventLoop) -> Reads:
    """Check the seeded history through the service, then the timed reads over it."""
    service = WalletStatementService(storage=storage)
    account = storage.run_sync(lambda uow: uow.ledger.get_account(WALLET.id), write=False)
    balance = account.balance if account else None
    newest = loop.run_until_complete(service.transactions(COMPANY, WALLET.id, PageRequest(PAGE)))
    if not newest.items[0].balance_after == balance == history.balance:
        raise RuntimeError(f"seeded history ends at {newest.items[0].balance_after}, not {balance}")
    february = (date(2025, 2, 1), date(2025, 2, 28))
    statement = loop.run_until_complete(service.statement(COMPANY, WALLET.id, *february))
    moved = sum(t.amount for t in statement.transactions if t.counter is EntryCounter.BALANCE)
    if statement.closing_balance != statement.opening_balance + moved:
        raise RuntimeError("the month's statement does not close on its movements")
    if len(statement.transactions) != min(MONTH, history.count):
        raise RuntimeError(f"the month holds {len(statement.transactions)} transactions")
    cursor = PageRequest(PAGE, history.middle)

    def run(make: Callable[[], Any]) -> Workload:
        return lambda count: timed(lambda: loop.run_until_complete(make()), count)

    return Reads(
        page=run(lambda: service.transactions(COMPANY, WALLET.id, PageRequest(PAGE))),
        middle=run(lambda: service.transactions(COMPANY, WALLET.id, cursor)),
        month=run(lambda: service.statement(COMPANY, WALLET.id, *february)),
    )


def _bench(
    targets: Mapping[str, tuple[str, Callable[[], History]]], count: int, reps: int
) -> dict[str, Samples]:
    loop = asyncio.new_event_loop()
    with ExitStack() as stack:
        stack.callback(loop.close)
        workloads: dict[str, Workload] = {}
        for name, (url, seed) in targets.items():
            storage = open_storage(url)
            stack.callback(storage.close)
            r = reads(storage, seed(), loop)
            workloads |= {f"{name}_page": r.page, f"{name}_middle": r.middle}
            workloads[f"{name}_month"] = r.month
        return interleave(workloads, count, reps)


def bench_sqlite(small: int, large: int, count: int, reps: int) -> dict[str, Samples]:
    """The reads on SQLite at ``small`` and ``large`` postings; keys ``{small,large}_{page,
    middle,month}``."""
    with tempfile.TemporaryDirectory(prefix="treasury-bench-") as tmp:
        targets: dict[str, tuple[str, Callable[[], History]]] = {}
        for name, rows in (("small", small), ("large", large)):
            path = Path(tmp) / f"{name}.db"
            url = sqlite_url(path.parent, path.name)
            targets[name] = (url, partial(seed_sqlite, str(path), rows))
        return _bench(targets, count, reps)


def bench_postgres(
    small: int, large: int, count: int, reps: int, url: str = POSTGRES_URL
) -> dict[str, Samples]:
    """The reads on PostgreSQL at ``url``; keys as for SQLite."""
    with postgres_schema(url) as small_url, postgres_schema(url) as large_url:
        targets: dict[str, tuple[str, Callable[[], History]]] = {
            "small": (small_url, lambda: seed_postgres(small_url, small)),
            "large": (large_url, lambda: seed_postgres(large_url, large)),
        }
        return _bench(targets, count, reps)


_LABELS = {
    "page": f"newest page of {PAGE} transactions",
    "middle": f"page of {PAGE} from the middle (starting_after)",
    "month": f"statement of a month ({MONTH} transactions)",
}


def rows(backend: str, small: int, large: int, samples: dict[str, Samples]) -> list[Row]:
    """Per read: the cost at ``small``, and at ``large`` with its ratio to ``small``."""
    out: list[Row] = []
    for read, label in _LABELS.items():
        low, high = samples[f"small_{read}"], samples[f"large_{read}"]
        times = ratio(high, low, of_cost=True)
        out.append(Row(f"{backend}: {label}, {small:,} postings", cost(low), cpu(low)))
        out.append(
            Row(
                f"{backend}: {label}, {large:,} postings",
                cost(high),
                cpu(high),
                f"{times:.2f}x small",
                f"<= {TARGET:g}x",
                verdict(times <= TARGET),
            )
        )
    return out
