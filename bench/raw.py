"""The raw drivers doing a ledger movement's statements, as the baseline for ``SqlStorage``.

Per movement, one transaction: ``UPDATE ... RETURNING`` of both account rows in sorted id order
(the statement the adapter sends, returning the whole row) and one ``INSERT`` of the posting row,
into the tables the migrations create, at the same durability settings as the adapter.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from bench.fixtures import LOCK_ORDER, NOW, NOW_SQLITE, SOURCE, WALLET, JournalIds

_COUNTERS = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)
_POSTING_COLUMNS = (
    "id",
    "journal_id",
    "operation",
    "kind",
    "debit_account_id",
    "credit_account_id",
    "currency",
    "amount",
    "released",
    "category",
    "pending_id",
    "deadline",
    "created_at",
)


def _bump_sql(mark: str) -> str:
    sets = ", ".join(f"{c} = {c} + {mark}" for c in _COUNTERS)
    return f"UPDATE ledger_accounts SET {sets} WHERE id = {mark} RETURNING *"


def _insert_sql(mark: str) -> str:
    return (
        f"INSERT INTO ledger_postings ({', '.join(_POSTING_COLUMNS)}) "
        f"VALUES ({', '.join([mark] * len(_POSTING_COLUMNS))})"
    )


def _bump_params(account_id: str, amount: int) -> tuple[Any, ...]:
    """Counter deltas of a posted move of ``amount`` for one side, then the account id."""
    if account_id == SOURCE.id:
        return (amount, 0, 0, 0, 0, account_id)
    return (0, amount, 0, 0, 0, account_id)


def _posting_params(journal_id: str, amount: int, created_at: datetime | str) -> tuple[Any, ...]:
    return (
        f"{journal_id}.0",
        journal_id,
        "movement",
        "posted",
        SOURCE.id,
        WALLET.id,
        "USD",
        amount,
        0,
        None,
        None,
        None,
        created_at,
    )


class RawSqlite:
    """sqlite3 (stdlib) on a migrated file: WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._bump = _bump_sql("?")
        self._insert = _insert_sql("?")
        self._ids = JournalIds("raw")

    def move(self, amount: int = 1) -> None:
        """One movement in one committed transaction."""
        journal_id = self._ids.next()
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for account_id in LOCK_ORDER:
                cur.execute(self._bump, _bump_params(account_id, amount))
                if cur.fetchone() is None:
                    raise LookupError(account_id)
            cur.execute(self._insert, _posting_params(journal_id, amount, NOW_SQLITE))
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class RawPostgres:
    """psycopg 3 on one connection, default ``synchronous_commit``, one transaction per movement."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url)
        self._bump = _bump_sql("%s")
        self._insert = _insert_sql("%s")
        self._ids = JournalIds("raw")

    def move(self, amount: int = 1) -> None:
        """One movement in one committed transaction."""
        journal_id = self._ids.next()
        try:
            with self.conn.cursor() as cur:
                for account_id in LOCK_ORDER:
                    cur.execute(self._bump, _bump_params(account_id, amount))
                    if cur.fetchone() is None:
                        raise LookupError(account_id)
                cur.execute(self._insert, _posting_params(journal_id, amount, NOW))
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def _select_sql(mark: str) -> str:
    return f"SELECT * FROM ledger_accounts WHERE id = {mark}"


class RawSqliteReader:
    """A balance read with sqlite3: ``BEGIN``, one primary-key ``SELECT``, ``COMMIT``."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._select = _select_sql("?")

    def read(self) -> None:
        """Read the wallet's row in a read transaction."""
        cur = self.conn.cursor()
        cur.execute("BEGIN")
        if cur.execute(self._select, (WALLET.id,)).fetchone() is None:
            raise LookupError(WALLET.id)
        cur.execute("COMMIT")

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class RawPostgresReader:
    """A balance read with psycopg: one primary-key ``SELECT`` in its own transaction."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url)
        self._select = _select_sql("%s")

    def read(self) -> None:
        """Read the wallet's row in a transaction, then end it."""
        if self.conn.execute(self._select, (WALLET.id,)).fetchone() is None:
            raise LookupError(WALLET.id)
        self.conn.commit()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()
