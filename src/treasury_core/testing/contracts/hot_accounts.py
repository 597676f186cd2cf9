"""The storage contract's tests of shared accounts under concurrent movements.

The outside world, FX liquidity, fees and settlement accounts are touched by many concurrent
movements; a storage may spread their counters (the SQL storage stripes them on PostgreSQL), but
every read must still give the exact fold of their postings, and a reservation made in one
transaction and released in another must net to zero.
:class:`~treasury_core.testing.contracts.storage.
StorageContract` inherits these tests, so every storage runs them.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from treasury_core.ledger import (
    Account,
    AccountKind,
    Journal,
    Move,
    PendingCategory,
    PostPending,
    Reserve,
    VoidPending,
)
from treasury_core.ledger.invariants import check_invariants
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.fixtures import (
    NOW,
    account,
    apply,
    open_accounts,
    wallet_account,
    world,
)

_THREADS = 4
_STEPS = 15


def _settlement() -> Account:
    return Account("settlement:1:USD", "USD", AccountKind.SETTLEMENT, company_id=1)


class HotAccountContract:
    """Storage tests of accounts shared by every movement; mixed into ``StorageContract``."""

    def test_concurrent_movements_through_shared_accounts_sum_exactly(
        self, storage: Storage
    ) -> None:
        """Threads deposit, reserve and settle, and withdraw through ``world:USD`` and one
        settlement account at once: every read of the shared accounts is the exact sum."""
        wallets = [f"wal_{n}" for n in range(_THREADS)]
        open_accounts(storage, world(), _settlement(), *(wallet_account(w) for w in wallets))
        deadline = NOW + timedelta(days=1)
        errors: list[BaseException] = []

        def worker(n: int) -> None:
            wallet = wallets[n]
            try:
                for step in range(_STEPS):
                    j = f"{n}-{step}"
                    apply(storage, Journal(f"dep{j}", (Move("world:USD", wallet, "USD", 100),)))
                    # A card payment: reserved, then settled in a transaction of its own.
                    reserve = Reserve(
                        "world:USD", "settlement:1:USD", "USD", 30, PendingCategory.HOLD, deadline
                    )
                    apply(storage, Journal(f"auth{j}", (reserve,)))
                    apply(storage, Journal(f"cap{j}", (PostPending(f"auth{j}.0", 20),)))
                    # A pending withdrawal, voided.
                    out = Reserve(wallet, "world:USD", "USD", 7, PendingCategory.OUT, deadline)
                    apply(storage, Journal(f"wd{j}", (out,)))
                    apply(storage, Journal(f"void{j}", (VoidPending(f"wd{j}.0"),)))
                    apply(storage, Journal(f"out{j}", (Move(wallet, "world:USD", "USD", 40),)))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        runs = _THREADS * _STEPS
        shared = account(storage, "world:USD")
        assert shared.debits_posted == runs * (100 + 20)
        assert shared.credits_posted == runs * 40
        assert shared.counters()[2:] == (0, 0, 0)  # every reservation released exactly
        settlement = account(storage, "settlement:1:USD")
        assert (settlement.balance, settlement.pending_in) == (runs * 20, 0)
        assert all(account(storage, w).balance == _STEPS * 60 for w in wallets)

        def read_all(uow: UnitOfWork) -> tuple[list[Account], dict[str, Account]]:
            ids = ["world:USD", "settlement:1:USD"]
            return list(uow.ledger.all_accounts()), uow.ledger.get_accounts(ids)

        every, some = storage.run_sync(read_all, write=False)
        by_id = {a.id: a for a in every}
        assert by_id["world:USD"] == some["world:USD"] == shared
        assert by_id["settlement:1:USD"] == some["settlement:1:USD"] == settlement
        assert sum(a.balance for a in every) == 0
        check_invariants(storage)

    def test_a_shared_account_reserved_and_released_apart_nets_to_zero(
        self, storage: Storage
    ) -> None:
        """A deposit reserved in one transaction and completed in another leaves the world
        account's pending counter at zero, read alone or with the rest."""
        open_accounts(storage, world(), wallet_account("wal_a"))
        deadline = NOW + timedelta(days=1)
        for n in range(3):
            reserve = Reserve("world:USD", "wal_a", "USD", 50, PendingCategory.OUT, deadline)
            apply(storage, Journal(f"dep{n}", (reserve,)))
        assert account(storage, "world:USD").pending_out == 150
        assert account(storage, "wal_a").pending_in == 150
        for n in range(3):
            apply(storage, Journal(f"done{n}", (PostPending(f"dep{n}.0"),)))
        shared = account(storage, "world:USD")
        assert (shared.balance, shared.pending_out, shared.available_balance) == (-150, 0, -150)
        assert account(storage, "wal_a").balance == 150
        check_invariants(storage)
