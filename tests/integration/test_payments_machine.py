"""The payments state machine against its reference model, on memory, SQLite and PostgreSQL.

Each example gets a fresh storage: a MemoryStorage, a new SQLite file, or a new PostgreSQL schema
(dropped afterwards). The SQL runs are shorter so the file stays well under a minute. The last
tests break the payments service on purpose: the machine must notice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test

from tests.conftest import (
    bug_hunt,
    machine_settings,
    make_storage,
    postgres_storages,
    postgres_url_or_skip,
    sqlite_storages,
)
from treasury_core.bootstrap import Treasury, bootstrap
from treasury_core.config import TreasuryConfig
from treasury_core.errors import NotFound
from treasury_core.interface.urls import INTERFACE_PATHS
from treasury_core.ledger import Leg, PostPending
from treasury_core.memory.storage import MemoryStorage
from treasury_core.notifications.events import EventType
from treasury_core.payments import IntentFilter, PaymentIntent, Transition
from treasury_core.payments.records import Refund
from treasury_core.ports import UnitOfWork
from treasury_core.services.payments import PaymentService
from treasury_core.services.payments.capture import CaptureAndVoid
from treasury_core.services.payments.challenges import Challenges
from treasury_core.services.payments.charging import Charging
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.refunds import Refunds
from treasury_core.testing import PaymentsMachine
from treasury_core.testing.machines.payments import payments_machine, payments_machine_test_case

MEMORY_SETTINGS = machine_settings(examples=100, steps=40)
SQL_SETTINGS = machine_settings(examples=25, steps=25)
BUG_HUNT = bug_hunt(300)

TestPaymentsMachineOnMemory = payments_machine_test_case(
    MemoryStorage, settings=MEMORY_SETTINGS, name="PaymentsMachineOnMemory"
)


def test_payments_machine_on_sqlite(tmp_path: Path) -> None:
    run_state_machine_as_test(
        payments_machine(sqlite_storages(tmp_path, "payments")), settings=SQL_SETTINGS
    )


@pytest.mark.postgres
def test_payments_machine_on_postgres() -> None:
    storages = postgres_storages(postgres_url_or_skip())
    run_state_machine_as_test(payments_machine(storages), settings=SQL_SETTINGS)


@pytest.mark.parametrize(
    "backend",
    [
        "memory",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
)
def test_an_id_beyond_32_bits_is_not_found(backend: str, request: pytest.FixtureRequest) -> None:
    """Found by the machine: every intent id the request models accept is a 404 when unknown."""
    storage = make_storage(backend, request)
    try:
        treasury = bootstrap(TreasuryConfig(database_url="memory://"), storage=storage)
        company = asyncio.run(treasury.companies.create_company("Co")).company.id
        for call in (treasury.payments.capture, treasury.payments.cancel, treasury.payments.get):
            for intent_id in (10**12, 2**63 - 1):
                with pytest.raises(NotFound):
                    asyncio.run(call(company, intent_id))
        # The filters take any positive integer too: an account id past 32 bits matches nothing.
        for account_id in (10**12, 2**63 - 1):
            only = IntentFilter(account_id=account_id)
            assert asyncio.run(treasury.payments.count(company, only)) == 0
            assert asyncio.run(treasury.payments.list(company, only)).items == []
    finally:
        storage.close()


# Broken on purpose ----------------------------------------------------------------------------


class AuthorizesTwice(IntentSteps):
    """A service bug: every ``.authorized`` webhook is written to the outbox twice."""

    def intent_events(
        self, uow: UnitOfWork, moved: Transition, stored: PaymentIntent | None = None
    ) -> None:
        super().intent_events(uow, moved, stored)
        if EventType.PAYMENT_INTENT_AUTHORIZED in moved.events:
            self.intent_event(uow, stored or moved.intent, EventType.PAYMENT_INTENT_AUTHORIZED)


class CaptureKeepsTheHold(IntentSteps):
    """A service bug: a capture marks the intent PROCESSED but never posts the ledger hold."""

    def ledger(
        self,
        uow: UnitOfWork,
        owner: PaymentIntent | Refund,
        legs: Iterable[Leg],
        now: datetime | None = None,
        operation: str = "card",
    ) -> None:
        legs = tuple(legs)
        if isinstance(owner, PaymentIntent) and all(isinstance(g, PostPending) for g in legs):
            return
        super().ledger(uow, owner, legs, now, operation)


def _with_steps(broken: type[IntentSteps]) -> type[PaymentsMachine]:
    """The machine over a payments service whose shared steps are ``broken``."""

    class Machine(PaymentsMachine):
        def make_treasury(self, config: TreasuryConfig) -> Treasury:
            treasury = super().make_treasury(config)
            context, provider = treasury.adapters, treasury.payments.provider
            steps = broken(context=context, provider=provider)
            charging = Charging(
                context=context, steps=steps, provider=provider, hosted_pages=INTERFACE_PATHS
            )
            treasury.payments = PaymentService(
                steps=steps,
                charging=charging,
                challenges=Challenges(
                    context=context, steps=steps, provider=provider, charging=charging
                ),
                capture=CaptureAndVoid(context=context, steps=steps, provider=provider),
                refunds=Refunds(context=context, steps=steps, provider=provider),
            )
            return treasury

    return Machine


def test_the_machine_catches_a_service_that_authorizes_twice() -> None:
    with pytest.raises(AssertionError, match="events"):
        run_state_machine_as_test(_with_steps(AuthorizesTwice), settings=BUG_HUNT)


def test_the_machine_catches_a_capture_that_keeps_the_hold() -> None:
    with pytest.raises(AssertionError, match="hold"):
        run_state_machine_as_test(_with_steps(CaptureKeepsTheHold), settings=BUG_HUNT)


def test_machine_subclass_settings_are_used() -> None:
    class YenOnly(PaymentsMachine):
        currency_pool = ("JPY",)
        max_amount = 500

    machine = YenOnly()
    try:
        assert isinstance(machine.storage, MemoryStorage)
    finally:
        machine.teardown()
    run_state_machine_as_test(YenOnly, settings=machine_settings(examples=10, steps=15))
