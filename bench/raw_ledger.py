"""The raw drivers replaying the ledger workload: any wallet to any wallet, then balance reads.

A transfer here is :meth:`bench.raw_transfers.RawTransfers.same` with the two wallets as
arguments instead of fixed: the same statements (built by ``raw_transfers``), the same order,
the same rows, one transaction per transfer on one connection:

- both wallets read by id and company (``SELECT`` of the wallet row);
- both ledger accounts bumped with ``UPDATE ... RETURNING`` in sorted id order, the source's
  available balance checked on its returned row;
- the posting inserted;
- the transfer record inserted, its body as compact JSON built from a dict;
- the ``treasury.transfer.completed`` event inserted into the outbox.

A balance read is one ``SELECT`` of the wallet's ledger account row by id, checked to be a
wallet account of the company, with ``available = credits_posted - debits_posted -
debits_pending_holds - debits_pending_out`` as the service computes it. It runs as a statement
on its own (SQLite autocommit; psycopg with ``autocommit`` switched on for the reads), since one
statement is already atomic: the raw side does not pay for a ``BEGIN``/``COMMIT`` around it.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.raw_transfers import (
    FxQuote,
    RawPostgresTransfers,
    RawSqliteTransfers,
    RawTransfers,
    TransferWallets,
    _Cursor,
    _json,
)

#: ``SELECT *`` in table column order: id, currency, kind, company_id, guarded,
#: overdraft_limit, debits_posted, credits_posted, debits_pending_holds, debits_pending_out,
#: credits_pending.
_ACCOUNT = "SELECT * FROM ledger_accounts WHERE id = {mark}"
#: Unused by the ledger workload (same currency only); ``RawTransfers`` wants one.
_NO_FX = FxQuote(rate="1", to_amount=0)


@dataclass(frozen=True, slots=True)
class LedgerWallets:
    """The benchmark company and its wallets, in ``ledger_plan`` index order."""

    company_id: int
    ids: tuple[str, ...]


def _fixed(wallets: LedgerWallets) -> TransferWallets:
    # What ``RawTransfers`` keeps for its own fixed-pair methods; ``move`` does not use it.
    return TransferWallets(wallets.company_id, wallets.ids[0], wallets.ids[1], wallets.ids[1])


class RawLedger(RawTransfers):
    """Transfers between any two of the company's USD wallets; the driver is in the subclasses."""

    wallets: LedgerWallets

    def _ledger(self, mark: str, wallets: LedgerWallets, ids: itertools.count[int] | None) -> None:
        """Set up after the driver's ``__init__`` (which opened the connection)."""
        self.wallets = wallets
        self._account = _ACCOUNT.format(mark=mark)
        if ids is not None:  # several connections writing one database share one id sequence
            self._ids = ids

    def move(self, source: str, target: str, amount: int) -> None:
        """One same-currency transfer from ``source`` to ``target``, posted at once."""
        company_id, sql = self.wallets.company_id, self._sql
        n = next(self._ids)
        journal_id, transfer_id, event_id = (self._id(p, n) for p in ("jr", "trf", "evt"))
        now = datetime.now(UTC)
        stamp = self._time(now)
        record: dict[str, Any] = {
            "id": transfer_id,
            "from_wallet_id": source,
            "to_wallet_id": target,
            "from_amount": amount,
            "from_currency_id": "USD",
            "to_amount": amount,
            "to_currency_id": "USD",
            "exchange_rate_from_to": "1",
            "reference": None,
            "description": None,
            "status": "completed",
            "error": None,
            "created_at": now.isoformat(),
            "company_id": company_id,
            "pending_ids": [],
        }
        api = {k: v for k, v in record.items() if k not in ("company_id", "pending_ids")}
        api["exchange_rate_from_to"] = 1.0
        body, payload = _json(record), _json({"object": api})
        deltas = {source: (amount, 0, 0, 0, 0), target: (0, amount, 0, 0, 0)}

        def work(cur: _Cursor) -> None:
            self._wallet(cur, source, "USD")
            self._wallet(cur, target, "USD")
            for account_id in sorted(deltas):
                self._bump(cur, account_id, deltas[account_id], account_id == source)
            self._posting(
                cur,
                f"{journal_id}.0",
                journal_id,
                "posted",
                (source, target),
                "USD",
                amount,
                None,
                stamp,
            )
            cur.execute(
                sql.record, (transfer_id, "trf", company_id, "completed", None, stamp, body)
            )
            cur.execute(
                sql.event, (event_id, company_id, "treasury.transfer.completed", stamp, payload)
            )

        self._run(work)

    def _available(self, cur: _Cursor, wallet_id: str) -> int:
        cur.execute(self._account, (wallet_id,))
        row = cur.fetchone()
        if row is None or row[3] != self.wallets.company_id or row[2] != "wallet":
            raise LookupError(wallet_id)
        debits, credits, holds, out = row[6], row[7], row[8], row[9]
        return int(credits - debits - holds - out)

    @abc.abstractmethod
    def balances(self, wallet_ids: Sequence[str]) -> list[int]:
        """Each wallet's available balance, one ``SELECT`` (its own transaction) per wallet."""


class RawSqliteLedger(RawLedger, RawSqliteTransfers):
    """sqlite3 (stdlib): WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE`` ... ``COMMIT``."""

    def __init__(self, path: str, wallets: LedgerWallets) -> None:
        RawSqliteTransfers.__init__(self, path, _fixed(wallets), _NO_FX)
        self._ledger("?", wallets, None)

    def balances(self, wallet_ids: Sequence[str]) -> list[int]:
        cur = self.conn.cursor()
        return [self._available(cur, w) for w in wallet_ids]


class RawPostgresLedger(RawLedger, RawPostgresTransfers):
    """psycopg 3 on one connection, default ``synchronous_commit``, one transaction per call."""

    def __init__(
        self, url: str, wallets: LedgerWallets, ids: itertools.count[int] | None = None
    ) -> None:
        RawPostgresTransfers.__init__(self, url, _fixed(wallets), _NO_FX)
        self._ledger("%s", wallets, ids)

    def balances(self, wallet_ids: Sequence[str]) -> list[int]:
        self.conn.autocommit = True
        try:
            with self.conn.cursor() as cur:
                return [self._available(cur, w) for w in wallet_ids]
        finally:
            self.conn.autocommit = False


def shared_ids() -> itertools.count[int]:
    """One id sequence for several raw connections writing the same database."""
    return itertools.count(1)
