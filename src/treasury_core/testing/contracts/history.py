"""The storage contract's part on wallet histories (mixed into ``StorageContract``).

Kept in its own module so the contract's main module does not grow further; it holds pytest
tests only and is imported by :mod:`treasury_core.testing.contracts.storage` on first use.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from treasury_core.errors import InsufficientFunds
from treasury_core.ledger import (
    Account,
    AccountKind,
    EntryCounter,
    EntryPosition,
    EntryQuery,
    EntryType,
    Journal,
    Move,
    PendingCategory,
    Reserve,
    VoidPending,
    WalletEntry,
)
from treasury_core.ports import Storage, UnitOfWork

_NOW = datetime(2026, 1, 1, tzinfo=UTC)
_WALLET = Account("wal_H1", "USD", AccountKind.WALLET, company_id=1, guarded=True)
_WORLD = Account("world:USD", "USD", AccountKind.WORLD)
_FEES = Account("fees:USD", "USD", AccountKind.FEES)


def _entries(storage: Storage, query: EntryQuery) -> list[WalletEntry]:
    return storage.run_sync(lambda uow: uow.ledger.wallet_entries(query), write=False)


class WalletHistoryContract:
    """What every storage must do with wallet histories (see ``StorageContract``)."""

    def test_wallet_history_is_written_with_the_postings(self, storage: Storage) -> None:
        def setup(uow: UnitOfWork) -> None:
            for account in (_WALLET, _WORLD, _FEES):
                uow.ledger.open_account(account)

        storage.run_sync(setup)

        def apply(journal: Journal, at: datetime) -> None:
            storage.run_sync(lambda uow: uow.ledger.apply(journal, at))

        hour = timedelta(hours=1)
        apply(Journal("jr_1", (Move(_WORLD.id, _WALLET.id, "USD", 100),), "deposit"), _NOW)
        withdraw = Journal(
            "jr_2",
            (
                Reserve(_WALLET.id, _WORLD.id, "USD", 30, PendingCategory.OUT),
                Reserve(_WALLET.id, _FEES.id, "USD", 5, PendingCategory.OUT),
            ),
            "withdrawal",
            source_id="wd_1",
        )
        apply(withdraw, _NOW + hour)
        apply(
            Journal("jr_3", (VoidPending("jr_2.0"), VoidPending("jr_2.1")), "fail"), _NOW + 2 * hour
        )
        # A journal timed before the wallet's last entry (its request took its time earlier,
        # then waited for the lock): listed after it, at its time.
        apply(Journal("jr_4", (Move(_WALLET.id, _WORLD.id, "USD", 20),), "withdrawal"), _NOW)
        # A refused journal writes no entry.
        with pytest.raises(InsufficientFunds):
            apply(Journal("jr_5", (Move(_WALLET.id, _WORLD.id, "USD", 1_000),), "x"), _NOW)

        rows = _entries(storage, EntryQuery(_WALLET.id, 10))
        assert [
            (e.seq, e.type, e.counter, e.amount, e.balance_after, e.available_balance_after)
            for e in rows
        ] == [
            (6, EntryType.WITHDRAWAL, EntryCounter.BALANCE, -20, 80, 80),
            (5, EntryType.RELEASE, EntryCounter.PENDING, 5, 100, 100),
            (4, EntryType.RELEASE, EntryCounter.PENDING, 30, 100, 95),
            (3, EntryType.WITHDRAWAL_FEE, EntryCounter.PENDING, -5, 100, 65),
            (2, EntryType.WITHDRAWAL, EntryCounter.PENDING, -30, 100, 70),
            (1, EntryType.DEPOSIT, EntryCounter.BALANCE, 100, 100, 100),
        ]
        assert rows[0].created_at == rows[1].created_at == _NOW + 2 * hour
        assert [e.source_id for e in rows] == ["jr_4", "jr_3", "jr_3", "wd_1", "wd_1", "jr_1"]
        assert rows[5].id == "txn_1x0"
        assert rows[5].posting_id == "jr_1.0"
        # Paging, periods, a type, the entry before a time, one entry by id.
        second = EntryPosition(rows[1].created_at, rows[1].seq)
        assert _entries(storage, EntryQuery(_WALLET.id, 2, before=second)) == rows[2:4]
        window = EntryQuery(_WALLET.id, 10, created_gte=_NOW + hour, created_lt=_NOW + 2 * hour)
        assert _entries(storage, window) == rows[3:5]
        releases = EntryQuery(_WALLET.id, 1, type=EntryType.RELEASE)
        assert _entries(storage, releases) == rows[1:2]

        def last(before: datetime | None) -> WalletEntry | None:
            return storage.run_sync(
                lambda uow: uow.ledger.last_wallet_entry(_WALLET.id, before), write=False
            )

        assert last(None) == rows[0]
        assert last(_NOW + hour) == rows[5]
        assert last(_NOW) is None

        def by_id(wallet_id: str, entry_id: str) -> WalletEntry | None:
            return storage.run_sync(
                lambda uow: uow.ledger.wallet_entry(wallet_id, entry_id), write=False
            )

        assert by_id(_WALLET.id, rows[2].id) == rows[2]
        assert by_id("wal_other", rows[2].id) is None
        assert _entries(storage, EntryQuery("wal_other", 10)) == []
