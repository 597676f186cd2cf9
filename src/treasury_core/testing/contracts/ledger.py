"""The storage contract's ledger tests: running counters, refused journals, two-phase movements,
accounts and journal ids."""

from __future__ import annotations

from datetime import timedelta

import pytest

from treasury_core.errors import InsufficientFunds, LedgerRejected
from treasury_core.ledger import (
    ExpirePending,
    Journal,
    Move,
    PendingCategory,
    PendingStatus,
    PostPending,
    Reserve,
    VoidPending,
)
from treasury_core.ports import Storage
from treasury_core.testing.contracts.fixtures import (
    NOW,
    account,
    apply,
    open_accounts,
    snapshot,
    wallet_account,
    world,
)


class LedgerContract:
    """The ledger part of :class:`~treasury_core.testing.contracts.storage.StorageContract`.

    Mixed into the contract; each test takes the suite's ``storage`` fixture.
    """

    def test_movements_update_running_counters(self, storage: Storage) -> None:
        """Moves update balances and the posted debit and credit counters."""
        open_accounts(storage, world(), wallet_account("wal_a"), wallet_account("wal_b"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 1000),)))
        apply(storage, Journal("j2", (Move("wal_a", "wal_b", "USD", 300),)))
        a, b, w = (
            account(storage, "wal_a"),
            account(storage, "wal_b"),
            account(storage, "world:USD"),
        )
        assert (a.balance, b.balance, w.balance) == (700, 300, -1000)
        assert a.debits_posted == 300
        assert a.credits_posted == 1000

    def test_a_refused_journal_changes_nothing(self, storage: Storage) -> None:
        """A journal refused part-way (insufficient funds) leaves no trace."""
        open_accounts(storage, world(), wallet_account("wal_a"), wallet_account("wal_b"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 100),)))
        before = snapshot(storage)
        with pytest.raises(InsufficientFunds):
            apply(
                storage,
                Journal(
                    "j2", (Move("wal_a", "wal_b", "USD", 60), Move("wal_a", "wal_b", "USD", 41))
                ),
            )
        assert snapshot(storage) == before

    def test_two_phase_movements(self, storage: Storage) -> None:
        """Reserve, post (partially), expire and void pendings; the counters follow."""
        open_accounts(storage, world(), wallet_account("wal_a"), wallet_account("wal_b"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 1000),)))
        deadline = NOW + timedelta(days=7)
        apply(
            storage,
            Journal(
                "j2",
                (
                    Reserve("wal_a", "wal_b", "USD", 400, PendingCategory.OUT),
                    Reserve("wal_a", "world:USD", "USD", 100, PendingCategory.HOLD, deadline),
                ),
            ),
        )
        a = account(storage, "wal_a")
        assert (a.balance, a.pending_out, a.pending_holds, a.available_balance) == (
            1000,
            400,
            100,
            500,
        )
        assert account(storage, "wal_b").pending_in == 400
        with pytest.raises(InsufficientFunds):
            apply(storage, Journal("j3", (Move("wal_a", "wal_b", "USD", 501),)))

        apply(storage, Journal("j3", (PostPending("j2.0", 250),)))
        a, b = account(storage, "wal_a"), account(storage, "wal_b")
        assert (a.balance, a.pending_out, b.balance, b.pending_in) == (750, 0, 250, 0)

        due = storage.run_sync(lambda uow: uow.ledger.due_pendings(deadline, 10), write=False)
        assert [p.id for p in due] == ["j2.1"]
        assert storage.run_sync(lambda uow: uow.ledger.due_pendings(NOW, 10), write=False) == []
        with pytest.raises(LedgerRejected):
            apply(storage, Journal("j4", (PostPending("j2.1"),)), deadline)
        apply(storage, Journal("j4", (ExpirePending("j2.1"),)), deadline)
        assert account(storage, "wal_a").available_balance == 750
        pending = storage.run_sync(lambda uow: uow.ledger.get_pending("j2.1"), write=False)
        assert pending is not None
        assert pending.status is PendingStatus.EXPIRED
        assert pending.resolved_by == "j4.0"
        # Expiring twice is refused and changes nothing.
        before = snapshot(storage)
        with pytest.raises(LedgerRejected):
            apply(storage, Journal("j5", (ExpirePending("j2.1"),)), deadline)
        with pytest.raises(LedgerRejected):
            apply(storage, Journal("j5", (VoidPending("j2.0"),)), deadline)
        assert snapshot(storage) == before

    def test_ensure_account_is_idempotent(self, storage: Storage) -> None:
        """``ensure_account`` of an existing account keeps its balance."""
        open_accounts(storage, wallet_account("wal_a"))
        storage.run_sync(lambda uow: uow.ledger.ensure_account(world()))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 5),)))
        storage.run_sync(lambda uow: uow.ledger.ensure_account(world()))
        assert account(storage, "world:USD").balance == -5

    def test_postings_come_back_in_id_order(self, storage: Storage) -> None:
        """Postings list in id order, whatever the order of writing."""
        open_accounts(storage, world(), wallet_account("wal_a"))
        for journal_id in ("b", "a", "c"):
            apply(storage, Journal(journal_id, (Move("world:USD", "wal_a", "USD", 1),)))
        ids = storage.run_sync(lambda uow: [p.id for p in uow.ledger.postings()], write=False)
        assert ids == ["a.0", "b.0", "c.0"]

    def test_a_journal_id_applies_once(self, storage: Storage) -> None:
        """Applying a journal id again is refused and changes nothing."""
        open_accounts(storage, world(), wallet_account("wal_a"))
        journal = Journal("j1", (Move("world:USD", "wal_a", "USD", 100),))
        apply(storage, journal)
        before = snapshot(storage)
        with pytest.raises(LedgerRejected) as caught:
            apply(storage, journal)
        assert caught.value.code == "journal_duplicate"
        assert snapshot(storage) == before
