"""The ledger state machine against the reference model, on memory, SQLite and PostgreSQL.

Each example gets a fresh storage: a MemoryStorage, a new SQLite file, or a new PostgreSQL
schema (dropped afterwards). The SQL runs are shorter so the file stays well under a minute.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis.stateful import invariant, run_state_machine_as_test

from tests.conftest import (
    bug_hunt,
    machine_settings,
    postgres_storages,
    postgres_url_or_skip,
    sqlite_storages,
)
from treasury_core.ledger import (
    Account,
    AccountKind,
    Journal,
    Move,
    PendingCategory,
    PostPending,
    Reserve,
)
from treasury_core.memory.storage import MemoryStorage
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.invariants import InvariantViolation, check_invariants, read_ledger
from treasury_core.testing.machines.ledger import (
    LedgerMachine,
    ledger_machine,
    ledger_machine_test_case,
)
from treasury_sqlalchemy.storage import SqlStorage

T = TypeVar("T")

MEMORY_SETTINGS = machine_settings(examples=200, steps=50)
SQL_SETTINGS = machine_settings(examples=25, steps=30)

# The helper users call: a unittest TestCase class, collected by pytest like any other.
TestLedgerMachineOnMemory = ledger_machine_test_case(
    MemoryStorage, settings=MEMORY_SETTINGS, name="LedgerMachineOnMemory"
)


def test_ledger_machine_on_sqlite(tmp_path: Path) -> None:
    run_state_machine_as_test(
        ledger_machine(sqlite_storages(tmp_path, "ledger")), settings=SQL_SETTINGS
    )


@pytest.mark.postgres
def test_ledger_machine_on_postgres() -> None:
    storages = postgres_storages(postgres_url_or_skip())
    run_state_machine_as_test(ledger_machine(storages), settings=SQL_SETTINGS)


class LosesAcknowledgedWrites(MemoryStorage):
    """A storage with a classic bug: now and then it acknowledges a write it never commits.

    (Re-running committed writes, the bug this test used first, is now harmless: a journal id
    applies once on every backend.)
    """

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def run_sync(
        self, fn: Callable[[UnitOfWork], T], *, write: bool = True, snapshot: bool = False
    ) -> T:
        self.writes += write
        if not (write and self.writes % 5 == 0):
            return super().run_sync(fn, write=write, snapshot=snapshot)
        results: list[T] = []
        with contextlib.suppress(_Lost), self.transaction(write=True) as uow:
            results.append(fn(uow))
            raise _Lost  # rolls the transaction back after fn succeeded
        return results[0]


class _Lost(Exception):
    pass


def test_the_machine_catches_a_broken_storage() -> None:
    class BrokenStorageMachine(LedgerMachine):
        def make_storage(self) -> Storage:
            return LosesAcknowledgedWrites()

    quick = bug_hunt(50, steps=50)
    with pytest.raises(AssertionError, match="model"):
        run_state_machine_as_test(BrokenStorageMachine, settings=quick)


def test_machine_subclass_settings_are_used() -> None:
    # The subclass's pool and bound must be what the rules draw from: ignoring them would open
    # EUR, GBP or USD accounts and post amounts up to 10,000, which the invariant below refuses.
    # Not every amount is within max_amount: the rules also try a guarded account's exact room
    # and one more, and a wallet's room can hold what earlier steps moved in from unguarded
    # accounts (up to 4 legs of at most max_amount a step) plus the overdrafts (at most
    # max_amount a wallet). The bound is that sum: 205, against the default's 10,000.
    steps = 15
    ceiling = 3 * 4 * steps + 3 * LedgerMachine.max_wallets + 1
    seen: set[str] = set()
    posted: list[int] = []

    class TinyAmounts(LedgerMachine):
        max_amount = 3
        currency_pool = ("CHF", "JPY")

        @invariant()
        def uses_the_subclass_settings(self) -> None:
            snapshot = read_ledger(self.storage)
            currencies = {a.currency for a in snapshot.accounts}
            seen.update(currencies)
            assert currencies <= {"CHF", "JPY"}, currencies
            posted.extend(p.amount for p in snapshot.postings)
            assert all(p.amount <= ceiling for p in snapshot.postings), posted

    machine = TinyAmounts()
    try:
        assert isinstance(machine.storage, MemoryStorage)
    finally:
        machine.teardown()
    run_state_machine_as_test(TinyAmounts, settings=machine_settings(examples=10, steps=steps))
    assert seen == {"CHF", "JPY"}
    assert posted


# check_invariants through the port on every backend ------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def small_ledger(storage: Storage) -> None:
    accounts = [
        Account("world-USD", "USD", AccountKind.WORLD),
        Account("w1", "USD", AccountKind.WALLET, company_id=1, guarded=True),
        Account("w2", "USD", AccountKind.WALLET, company_id=1, guarded=True, overdraft_limit=50),
    ]

    def open_all(uow: UnitOfWork) -> None:
        for account in accounts:
            uow.ledger.open_account(account)

    storage.run_sync(open_all)
    journals = [
        Journal("j1", (Move("world-USD", "w1", "USD", 500),)),
        Journal(
            "j2",
            (
                Reserve("w1", "w2", "USD", 200, PendingCategory.HOLD, T0 + timedelta(minutes=5)),
                Move("w2", "world-USD", "USD", 40),
            ),
        ),
        Journal("j3", (PostPending("j2.0", 150),)),
    ]
    for journal in journals:
        storage.run_sync(applying(journal))


def applying(journal: Journal) -> Callable[[UnitOfWork], object]:
    return lambda uow: uow.ledger.apply(journal, T0)


def test_check_invariants_on_every_backend(storage: Storage) -> None:
    small_ledger(storage)
    check_invariants(storage)
    # Corrupt one counter behind the port's back, the way each backend stores it.
    if isinstance(storage, SqlStorage):
        with storage.engine.begin() as conn:
            conn.exec_driver_sql(
                "UPDATE ledger_accounts SET credits_posted = credits_posted + 1 WHERE id = 'w2'"
            )
    else:
        assert isinstance(storage, MemoryStorage)
        w2 = storage._state.accounts["w2"]
        storage._state.accounts["w2"] = replace(w2, credits_posted=w2.credits_posted + 1)
    with pytest.raises(InvariantViolation) as caught:
        check_invariants(storage)
    assert (
        "[2] USD: posted credits - debits over all accounts is 1, not 0" in caught.value.violations
    )
    assert (
        "[3] account w2: stored credits_posted is 151, its postings fold to 150"
        in caught.value.violations
    )
