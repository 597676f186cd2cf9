"""The storage contract's tests of the ledger's primitive steps
(:class:`~treasury_core.ledger.LedgerSteps`), each on its own: what ``apply_journal`` relies on.

``apply_journal`` holds the rules (order, checks, duplicates); these tests hold each step to
what it promises, so a storage that passes them applies journals as every other does.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from treasury_core.ledger import (
    EntryPosition,
    Journal,
    Move,
    PendingStatus,
    PostingExists,
    Reserve,
    plan_journal,
)
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.fixtures import (
    NOW,
    Boom,
    account,
    apply,
    open_accounts,
    wallet_account,
    world,
)


class LedgerStepsContract:
    """The ledger steps part of :class:`~treasury_core.testing.contracts.storage.StorageContract`.

    Mixed into the contract; each test takes the suite's ``storage`` fixture.
    """

    def test_lock_pendings_reads_the_stored_movements_asked_for(self, storage: Storage) -> None:
        """Stored pending movements come back as stored; an id not stored is left out."""
        open_accounts(storage, world(), wallet_account("wal_a"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 500),)))
        apply(storage, Journal("j2", (Reserve("wal_a", "world:USD", "USD", 200),)))

        def lock(uow: UnitOfWork) -> dict[str, PendingStatus]:
            found = uow.ledger.lock_pendings(["j2.0", "j9.0"])
            return {i: p.status for i, p in found.items()}

        assert storage.run_sync(lock) == {"j2.0": PendingStatus.PENDING}

    def test_add_deltas_returns_the_accounts_as_updated_and_rolls_back(
        self, storage: Storage
    ) -> None:
        """Each stored account gets its delta and comes back updated (an account not stored
        is left out); only an unguarded account may come back unread; a rollback undoes it."""
        open_accounts(storage, world(), wallet_account("wal_a"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 500),)))
        journal = Journal("j2", (Move("world:USD", "wal_a", "USD", 70),))
        plan = plan_journal(journal, {}, NOW)
        missing = plan_journal(Journal("j3", (Move("world:USD", "wal_x", "USD", 1),)), {}, NOW)

        def add(uow: UnitOfWork) -> None:
            after, unread = uow.ledger.add_deltas(plan)
            assert set(after) == {"world:USD", "wal_a"}
            assert "wal_a" not in unread
            assert all(not after[i].guarded for i in unread)
            assert after["wal_a"].balance == 570
            assert after["wal_a"].credits_posted == 570
            assert after["world:USD"].currency == "USD"
            found, _ = uow.ledger.add_deltas(missing)
            assert "wal_x" not in found
            raise Boom

        with pytest.raises(Boom):
            storage.run_sync(add)
        assert account(storage, "wal_a").balance == 500

    def test_write_postings_reads_history_heads_and_refuses_a_taken_id(
        self, storage: Storage
    ) -> None:
        """The wallets' latest history positions come back (``None`` without history), and a
        posting id already stored raises ``PostingExists``."""
        open_accounts(storage, world(), wallet_account("wal_a"), wallet_account("wal_b"))
        apply(storage, Journal("j1", (Move("world:USD", "wal_a", "USD", 500),)))
        later = NOW + timedelta(minutes=1)
        plan = plan_journal(Journal("j2", (Move("wal_a", "wal_b", "USD", 5),)), {}, later)

        heads: list[dict[str, EntryPosition | None]] = []

        def write(uow: UnitOfWork) -> None:
            uow.ledger.add_deltas(plan)
            heads.append(dict(uow.ledger.write_postings(plan, ["wal_a", "wal_b"])))
            raise Boom  # postings without their history entries must not be kept

        with pytest.raises(Boom):
            storage.run_sync(write)
        assert heads == [{"wal_a": EntryPosition(NOW, 1), "wal_b": None}]
        taken = plan_journal(Journal("j1", (Move("world:USD", "wal_b", "USD", 1),)), {}, later)

        def again(uow: UnitOfWork) -> None:
            uow.ledger.add_deltas(taken)
            uow.ledger.write_postings(taken, [])

        with pytest.raises(PostingExists):
            storage.run_sync(again)
        assert account(storage, "wal_b").balance == 0
