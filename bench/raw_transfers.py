"""The raw drivers doing what ``transfers.create`` makes durable, as its baseline.

Per transfer, one transaction on one connection, with the statements the service sends (seen
with a statement trace: SQLite's trace callback, libpq's trace on PostgreSQL):

- both wallets read by id and company (``SELECT`` of the wallet row);
- every touched ledger account bumped with ``UPDATE ... RETURNING`` in sorted id order, the
  source's available balance checked on the returned row;
- the posting rows inserted, one ``INSERT`` each;
- FX only: the two reservations inserted into ``ledger_pendings``;
- the transfer record inserted, its body as compact JSON built from a dict;
- same currency: the ``treasury.transfer.completed`` event inserted into the outbox;
  FX: the ``settle_transfer`` job inserted, due 60 s later.

What the raw side leaves out is what the service does around this: the FX quote through the
rates port (the raw side converts with a fixed rate), the thread hop to the storage worker, the
wallet history entries, and the domain objects (journal plan, pydantic records, ULIDs: raw ids
are a counter of the same length). The service no longer reads the wallets once it knows them
(it reads them once, in a transaction of its own, on a wallet's first transfer), so on the
repeated transfers it sends two statements fewer than the raw side here does.
"""

from __future__ import annotations

import abc
import itertools
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

_COUNTERS = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)
_POSTING_COLUMNS = (
    "id, journal_id, operation, kind, debit_account_id, credit_account_id, currency, amount,"
    " released, category, pending_id, deadline, created_at"
)
_PENDING_COLUMNS = (
    "id, debit_account_id, credit_account_id, currency, amount, category, deadline, status,"
    " resolved_by"
)
_RECORD_COLUMNS = "id, kind, company_id, status, lookup_key, created_at, body"
_EVENT_COLUMNS = "id, company_id, type, created_at, payload"
_JOB_COLUMNS = "id, kind, resource_id, company_id, due_at, status"
_WALLET_COLUMNS = "id, company_id, name, description, currency, status, created_at"
#: The sandbox rail's settlement delay for FX transfers.
FX_SETTLEMENT = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class TransferWallets:
    """The benchmark company and its wallets (created through the service on both sides)."""

    company_id: int
    source: str  # USD, funded
    same: str  # USD
    fx: str  # EUR


@dataclass(frozen=True, slots=True)
class FxQuote:
    """The conversion the raw side applies (the service's rate for the same pair)."""

    rate: str
    to_amount: int


class _Statements:
    """The SQL of one transfer for a driver's parameter mark."""

    def __init__(self, mark: str) -> None:
        def insert(table: str, columns: str) -> str:
            marks = ", ".join([mark] * len(columns.split(",")))
            return f"INSERT INTO {table} ({columns}) VALUES ({marks})"

        sets = ", ".join(f"{c} = {c} + {mark}" for c in _COUNTERS)
        self.wallet = (
            f"SELECT {_WALLET_COLUMNS} FROM wallets WHERE id = {mark} AND company_id = {mark}"
        )
        self.bump = f"UPDATE ledger_accounts SET {sets} WHERE id = {mark} RETURNING *"
        self.posting = insert("ledger_postings", _POSTING_COLUMNS)
        self.pending = insert("ledger_pendings", _PENDING_COLUMNS)
        self.record = insert("treasury_records", _RECORD_COLUMNS)
        self.event = insert("events", _EVENT_COLUMNS)
        self.job = insert("jobs", _JOB_COLUMNS)


class _Cursor(Protocol):
    def execute(self, query: Any, params: Any = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


class RawTransfers(abc.ABC):
    """One transfer per call in one transaction; the driver specifics are in the subclasses."""

    def __init__(self, mark: str, wallets: TransferWallets, quote: FxQuote) -> None:
        self._sql = _Statements(mark)
        self._wallets = wallets
        self._quote = quote
        self._ids = itertools.count(1)

    @abc.abstractmethod
    def _run(self, work: Callable[[_Cursor], None]) -> None:
        """Run ``work`` on a cursor in one committed transaction (rolled back if it raises)."""

    @abc.abstractmethod
    def _time(self, value: datetime | None) -> Any:
        """``value`` as the driver binds it for a ``UtcDateTime`` column."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection."""

    def _id(self, prefix: str, n: int) -> str:
        return f"{prefix}_{n:026d}"  # as long as a ULID id

    def _wallet(self, cur: _Cursor, wallet_id: str, currency: str) -> None:
        cur.execute(self._sql.wallet, (wallet_id, self._wallets.company_id))
        row = cur.fetchone()
        if row is None or row[4] != currency:
            raise LookupError(wallet_id)

    def _bump(self, cur: _Cursor, account_id: str, deltas: tuple[int, ...], check: bool) -> None:
        cur.execute(self._sql.bump, (*deltas, account_id))
        row = cur.fetchone()
        if row is None:
            raise LookupError(account_id)
        if check:
            # id, currency, kind, company_id, guarded, overdraft_limit, then the five counters.
            overdraft, debits, credits, holds, out = row[5], row[6], row[7], row[8], row[9]
            if credits - debits - holds - out < -overdraft:
                raise ValueError(f"insufficient funds in {account_id}")

    def _posting(
        self,
        cur: _Cursor,
        posting_id: str,
        journal_id: str,
        kind: str,
        accounts: tuple[str, str],
        currency: str,
        amount: int,
        category: str | None,
        now: Any,
    ) -> None:
        cur.execute(
            self._sql.posting,
            (
                posting_id,
                journal_id,
                "transfer",
                kind,
                *accounts,
                currency,
                amount,
                0,
                category,
                None,
                None,
                now,
            ),
        )

    def _record(
        self,
        transfer_id: str,
        to_wallet: str,
        amount: int,
        to_currency: str,
        to_amount: int,
        rate: str,
        status: str,
        now: datetime,
        pending_ids: list[str],
    ) -> dict[str, Any]:
        return {
            "id": transfer_id,
            "from_wallet_id": self._wallets.source,
            "to_wallet_id": to_wallet,
            "from_amount": amount,
            "from_currency_id": "USD",
            "to_amount": to_amount,
            "to_currency_id": to_currency,
            "exchange_rate_from_to": rate,
            "reference": None,
            "description": None,
            "status": status,
            "error": None,
            "created_at": now.isoformat(),
            "company_id": self._wallets.company_id,
            "pending_ids": pending_ids,
        }

    def same(self, amount: int) -> None:
        """A same-currency transfer: posted at once, with its completion event."""
        w, sql = self._wallets, self._sql
        n = next(self._ids)
        journal_id, transfer_id, event_id = (self._id(p, n) for p in ("jr", "trf", "evt"))
        now = datetime.now(UTC)
        stamp = self._time(now)
        record = self._record(transfer_id, w.same, amount, "USD", amount, "1", "completed", now, [])
        api = {k: v for k, v in record.items() if k not in ("company_id", "pending_ids")}
        api["exchange_rate_from_to"] = 1.0
        body, payload = _json(record), _json({"object": api})
        debit = (amount, 0, 0, 0, 0)
        credit = (0, amount, 0, 0, 0)

        def work(cur: _Cursor) -> None:
            self._wallet(cur, w.source, "USD")
            self._wallet(cur, w.same, "USD")
            for account_id in sorted((w.source, w.same)):
                source = account_id == w.source
                self._bump(cur, account_id, debit if source else credit, source)
            self._posting(
                cur,
                f"{journal_id}.0",
                journal_id,
                "posted",
                (w.source, w.same),
                "USD",
                amount,
                None,
                stamp,
            )
            cur.execute(
                sql.record, (transfer_id, "trf", w.company_id, "completed", None, stamp, body)
            )
            cur.execute(
                sql.event,
                (event_id, w.company_id, "treasury.transfer.completed", stamp, payload),
            )

        self._run(work)

    def fx(self, amount: int) -> None:
        """A cross-currency transfer as created: two reservations through FX liquidity, a job."""
        w, sql, quote = self._wallets, self._sql, self._quote
        n = next(self._ids)
        journal_id, transfer_id, job_id = (self._id(p, n) for p in ("jr", "trf", "job"))
        legs = (f"{journal_id}.0", f"{journal_id}.1")
        now = datetime.now(UTC)
        stamp, due = self._time(now), self._time(now + FX_SETTLEMENT)
        record = self._record(
            transfer_id, w.fx, amount, "EUR", quote.to_amount, quote.rate, "pending", now, [*legs]
        )
        body = _json(record)
        to_amount = quote.to_amount
        bumps = {
            w.source: (0, 0, 0, amount, 0),
            "fx:USD": (0, 0, 0, 0, amount),
            "fx:EUR": (0, 0, 0, to_amount, 0),
            w.fx: (0, 0, 0, 0, to_amount),
        }
        reservations = (
            (legs[0], (w.source, "fx:USD"), "USD", amount),
            (legs[1], ("fx:EUR", w.fx), "EUR", to_amount),
        )

        def work(cur: _Cursor) -> None:
            self._wallet(cur, w.source, "USD")
            self._wallet(cur, w.fx, "EUR")
            for account_id in sorted(bumps):
                self._bump(cur, account_id, bumps[account_id], account_id == w.source)
            for leg, accounts, currency, value in reservations:
                self._posting(
                    cur, leg, journal_id, "pending", accounts, currency, value, "out", stamp
                )
            for leg, accounts, currency, value in reservations:
                cur.execute(
                    sql.pending, (leg, *accounts, currency, value, "out", None, "pending", None)
                )
            cur.execute(
                sql.record, (transfer_id, "trf", w.company_id, "pending", None, stamp, body)
            )
            cur.execute(
                sql.job, (job_id, "settle_transfer", transfer_id, w.company_id, due, "pending")
            )

        self._run(work)


class RawSqliteTransfers(RawTransfers):
    """sqlite3 (stdlib): WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE`` ... ``COMMIT``."""

    def __init__(self, path: str, wallets: TransferWallets, quote: FxQuote) -> None:
        super().__init__("?", wallets, quote)
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=ON")

    def _time(self, value: datetime | None) -> Any:
        # How SQLAlchemy stores an aware UTC time on SQLite: naive text with microseconds.
        if value is None:
            return None
        return value.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")

    def _run(self, work: Callable[[_Cursor], None]) -> None:
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            work(cur)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class RawPostgresTransfers(RawTransfers):
    """psycopg 3 on one connection, default ``synchronous_commit``, one transaction per call."""

    def __init__(self, url: str, wallets: TransferWallets, quote: FxQuote) -> None:
        import psycopg

        super().__init__("%s", wallets, quote)
        self.conn = psycopg.connect(url)

    def _time(self, value: datetime | None) -> Any:
        return value

    def _run(self, work: Callable[[_Cursor], None]) -> None:
        try:
            with self.conn.cursor() as cur:
                work(cur)
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()
