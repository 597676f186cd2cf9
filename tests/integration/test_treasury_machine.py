"""The treasury state machine against its reference model, on memory, SQLite and PostgreSQL.

Each example gets a fresh storage: a MemoryStorage, a new SQLite file, or a new PostgreSQL
schema (dropped afterwards). The SQL runs are shorter so the file stays well under a minute.
The last tests break a storage and a service on purpose: the machine must notice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis.stateful import invariant, run_state_machine_as_test

from tests.conftest import (
    bug_hunt,
    machine_settings,
    postgres_storages,
    postgres_url_or_skip,
    sqlite_storages,
)
from treasury_core.bootstrap import Treasury
from treasury_core.config import TreasuryConfig
from treasury_core.jobs import Job
from treasury_core.memory.storage import MemoryStorage
from treasury_core.movements.records import Deposit
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.services.movements.deposits import DepositService
from treasury_core.testing.machines.treasury import (
    TreasuryMachine,
    treasury_machine,
    treasury_machine_test_case,
)

MEMORY_SETTINGS = machine_settings(examples=100, steps=40)
SQL_SETTINGS = machine_settings(examples=10, steps=25)
BUG_HUNT = bug_hunt(200)

# The helper users call: a unittest TestCase class, collected by pytest like any other.
TestTreasuryMachineOnMemory = treasury_machine_test_case(
    MemoryStorage, settings=MEMORY_SETTINGS, name="TreasuryMachineOnMemory"
)


def test_treasury_machine_on_sqlite(tmp_path: Path) -> None:
    run_state_machine_as_test(
        treasury_machine(sqlite_storages(tmp_path, "treasury")), settings=SQL_SETTINGS
    )


@pytest.mark.postgres
def test_treasury_machine_on_postgres() -> None:
    storages = postgres_storages(postgres_url_or_skip())
    run_state_machine_as_test(treasury_machine(storages), settings=SQL_SETTINGS)


# Broken on purpose ----------------------------------------------------------------------------


class _LateJobs:
    """Job queries that miss a job due exactly now (``<`` where ``<=`` belongs)."""

    def __init__(self, jobs: Any) -> None:
        self._jobs = jobs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jobs, name)

    def due(self, now: datetime, limit: int) -> list[Job]:
        return [j for j in self._jobs.due(now, limit) if j.due_at < now]


class _LateUnitOfWork:
    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    def __getattr__(self, name: str) -> Any:
        return getattr(self._uow, name)

    @property
    def jobs(self) -> _LateJobs:
        return _LateJobs(self._uow.jobs)


class SettlesOneTickLate(MemoryStorage):
    """A storage with an off-by-one: movements due at ``now`` wait for the next advance."""

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True, snapshot: bool = False) -> Iterator[UnitOfWork]:
        with super().transaction(write=write, snapshot=snapshot) as uow:
            yield _LateUnitOfWork(uow)  # duck-typed: every other repository passes through


class CreditsTheAnnouncedAmount(DepositService):
    """A service bug: completing a deposit ignores the amount the bank actually delivered."""

    async def complete(
        self, company_id: int | None, deposit_id: str, *, amount: int | None = None
    ) -> Deposit:
        return await super().complete(company_id, deposit_id)


def test_the_machine_catches_a_storage_that_settles_late() -> None:
    class Machine(TreasuryMachine):
        def make_storage(self) -> Storage:
            return SettlesOneTickLate()

    with pytest.raises(AssertionError, match="model"):
        run_state_machine_as_test(Machine, settings=BUG_HUNT)


def test_the_machine_catches_a_service_that_ignores_the_received_amount() -> None:
    class Machine(TreasuryMachine):
        def make_treasury(self, config: TreasuryConfig) -> Treasury:
            treasury = super().make_treasury(config)
            treasury.deposits = CreditsTheAnnouncedAmount(
                adapters=treasury.adapters,
                quotes=treasury.quotes,
                wallets=treasury.wallet_currencies,
            )
            return treasury

    with pytest.raises(AssertionError, match="model"):
        run_state_machine_as_test(Machine, settings=BUG_HUNT)


def test_machine_subclass_settings_are_used() -> None:
    # The subclass's pool and bound must be what the rules draw from: ignoring them would draw
    # EUR, GBP, JPY or KWD wallets and larger deposits, which the invariant below refuses.
    seen: set[str] = set()
    deposits: list[int] = []

    class TwoCurrencies(TreasuryMachine):
        currency_pool = ("CHF", "USD")
        max_amount = 50

        @invariant()
        def uses_the_subclass_settings(self) -> None:
            wallets = {w.currency for w in self.model.wallets.values()}
            seen.update(wallets)
            assert wallets <= {"CHF", "USD"}, wallets
            for movement in self.model.movements.values():
                if movement.kind == "deposit":
                    deposits.append(int(str(movement.fields["from_amount"])))

    machine = TwoCurrencies()
    try:
        assert isinstance(machine.storage, MemoryStorage)
    finally:
        machine.teardown()
    run_state_machine_as_test(TwoCurrencies, settings=machine_settings(examples=10, steps=15))
    assert seen == {"CHF", "USD"}
    assert deposits and max(deposits) <= 50
