"""The payments service consults the card provider's capability flags before calling it.

A provider answering ``False`` to a ``*_supported()`` flag is never asked to do that thing: the
request is refused with 400 ``provider_capability_unsupported`` and nothing is written or sent.
The fake provider is the sandbox provider with flags switched off, so it implements the real
port; it counts the calls that reach it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import ErrorKind, InvalidRequestError, ProviderError
from treasury_core.payments.intents import CaptureMethod, IntentFilter, IntentStatus
from treasury_core.payments.records import TransactionStatus
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.ports import Clock
from treasury_core.ports.card_provider import CardData, CardProviderResult
from treasury_core.testing import FakeClock, MemoryStorage, check_invariants
from treasury_sandbox.card_provider import THREE_D_SECURE_CARD, SandboxCardProvider

CODE = "provider_capability_unsupported"
CARD = CardData(number="4242424242424242", expiry_month=12, expiry_year=2040, cvc="123")


class LimitedProvider(SandboxCardProvider):
    """The sandbox provider with each capability switchable, recording every money call."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.manual_capture = True
        self.refunds = True
        self.partial_refunds = True
        self.three_d_secure = True
        self.calls: list[str] = []

    def manual_capture_supported(self) -> bool:
        return self.manual_capture

    def refunds_supported(self) -> bool:
        return self.refunds

    def partial_refunds_supported(self) -> bool:
        return self.partial_refunds

    def three_d_secure_supported(self) -> bool:
        return self.three_d_secure

    async def authorize(
        self,
        card: CardData,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
    ) -> CardProviderResult:
        self.calls.append("authorize")
        return await super().authorize(card, amount, currency, capture=capture)

    async def capture(self, reference: str, amount: int) -> CardProviderResult:
        self.calls.append("capture")
        return await super().capture(reference, amount)

    async def void(self, reference: str) -> CardProviderResult:
        self.calls.append("void")
        return await super().void(reference)

    async def refund(self, reference: str, amount: int) -> CardProviderResult:
        self.calls.append("refund")
        return await super().refund(reference, amount)

    async def complete_action(self, reference: str) -> CardProviderResult:
        self.calls.append("complete_action")
        return await super().complete_action(reference)


@dataclass
class World:
    treasury: Treasury
    provider: LimitedProvider
    company: int
    account: int

    def run(self, coro: Any) -> Any:
        return asyncio.run(coro)

    def create(self, capture: CaptureMethod = CaptureMethod.AUTOMATIC) -> Any:
        request = CreateIntentRequest(
            account_id=self.account,
            billing_amount=1_000,
            billing_currency="USD",
            payment_type="Card Payment",
            capture_method=capture,
        )
        return self.run(self.treasury.payments.create(self.company, request))

    def paid(self, capture: CaptureMethod = CaptureMethod.AUTOMATIC, card: CardData = CARD) -> Any:
        intent = self.create(capture)
        return self.run(self.treasury.payments.pay(intent.payment_intent_lookup_id, card)).intent

    def state(self) -> tuple[object, ...]:
        """Everything a refusal must leave as it was: intents, events, records, the ledger."""

        def read(uow: Any) -> tuple[object, ...]:
            return (
                uow.intents.list(self.company, _ALL, 1000, None),
                uow.outbox.list(),
                list(uow.ledger.postings()),
                list(uow.ledger.pendings()),
            )

        return self.run(self.treasury.storage.run(read, write=False))  # type: ignore[no-any-return]


_ALL = IntentFilter()


@pytest.fixture
def world() -> Iterator[World]:
    clock = FakeClock()
    provider = LimitedProvider(clock)
    treasury = bootstrap(
        TreasuryConfig(database_url="memory://"),
        storage=MemoryStorage(),
        clock=clock,
        wall_clock=clock,
        card_provider=provider,
    )
    created = asyncio.run(treasury.companies.create_company("Acme"))
    yield World(treasury, provider, created.company.id, created.merchant_account.id)
    check_invariants(treasury.storage)
    treasury.close()


def _refused(excinfo: pytest.ExceptionInfo[InvalidRequestError]) -> InvalidRequestError:
    error = excinfo.value
    assert error.kind is ErrorKind.INVALID_REQUEST
    assert error.code == CODE
    return error


def test_manual_capture_is_refused_when_holds_cannot_be_captured(world: World) -> None:
    world.provider.manual_capture = False
    before = world.state()
    with pytest.raises(InvalidRequestError) as excinfo:
        world.create(CaptureMethod.MANUAL)
    assert _refused(excinfo).param == "capture_method"
    assert world.state() == before
    # Automatic capture needs no capability: it still works.
    assert world.paid().status is IntentStatus.PROCESSED


def test_a_manual_intent_is_not_authorized_once_the_provider_stopped_capturing(
    world: World,
) -> None:
    intent = world.create(CaptureMethod.MANUAL)
    world.provider.manual_capture = False
    before = world.state()
    with pytest.raises(InvalidRequestError) as excinfo:
        world.run(world.treasury.payments.pay(intent.payment_intent_lookup_id, CARD))
    _refused(excinfo)
    assert world.state() == before
    assert world.provider.calls == []


def test_capture_is_refused_when_the_provider_stopped_capturing(world: World) -> None:
    intent = world.paid(CaptureMethod.MANUAL)
    world.provider.manual_capture = False
    world.provider.calls.clear()
    before = world.state()
    with pytest.raises(InvalidRequestError) as excinfo:
        world.run(world.treasury.payments.capture(world.company, intent.id))
    _refused(excinfo)
    assert world.state() == before
    assert world.provider.calls == []
    # The hold can still be released: void is required of every provider.
    cancelled = world.run(world.treasury.payments.cancel(world.company, intent.id))
    assert cancelled.status is IntentStatus.CANCELLED


def test_refunds_are_refused_when_the_provider_cannot_refund(world: World) -> None:
    world.provider.refunds = False
    intent = world.paid()
    world.provider.calls.clear()
    before = world.state()
    for amount in (None, 1_000, 400):
        with pytest.raises(InvalidRequestError) as excinfo:
            world.run(world.treasury.payments.refund(world.company, intent.id, amount=amount))
        _refused(excinfo)
    assert world.state() == before
    assert world.provider.calls == []
    assert world.run(world.treasury.payments.refunds(world.company, intent.id)) == []


def test_a_refund_the_intent_itself_forbids_says_so_first(world: World) -> None:
    """The interface's own refusal (an uncaptured hold cannot be refunded) outranks the
    provider's capability: the caller learns what is wrong with the request itself."""
    world.provider.refunds = False
    intent = world.paid(CaptureMethod.MANUAL)
    with pytest.raises(InvalidRequestError) as excinfo:
        world.run(world.treasury.payments.refund(world.company, intent.id))
    assert excinfo.value.code == "refund_not_allowed"


def test_partial_refunds_are_refused_but_full_ones_pass(world: World) -> None:
    world.provider.partial_refunds = False
    intent = world.paid()
    world.provider.calls.clear()
    before = world.state()
    with pytest.raises(InvalidRequestError) as excinfo:
        world.run(world.treasury.payments.refund(world.company, intent.id, amount=400))
    assert _refused(excinfo).param == "amount"
    assert world.state() == before
    assert world.provider.calls == []
    refund = world.run(world.treasury.payments.refund(world.company, intent.id, amount=1_000))
    assert refund.amount == 1_000
    assert world.provider.calls == ["refund"]


def test_a_challenge_is_not_completed_by_a_provider_without_three_d_secure(
    world: World,
) -> None:
    intent = world.create()
    card = CardData(number=THREE_D_SECURE_CARD, expiry_month=12, expiry_year=2040, cvc="123")
    outcome = world.run(world.treasury.payments.pay(intent.payment_intent_lookup_id, card))
    assert outcome.transaction.status is TransactionStatus.REQUIRES_ACTION
    world.provider.three_d_secure = False
    world.provider.calls.clear()
    before = world.state()
    with pytest.raises(InvalidRequestError) as excinfo:
        world.run(world.treasury.payments.complete_challenge(intent.payment_intent_lookup_id))
    _refused(excinfo)
    assert world.state() == before
    assert world.provider.calls == []


def test_a_challenge_from_a_provider_without_three_d_secure_is_a_provider_error(
    world: World,
) -> None:
    """The provider broke its word: the attempt is abandoned at the provider, nothing kept."""
    world.provider.three_d_secure = False
    intent = world.create()
    before = world.state()
    card = CardData(number=THREE_D_SECURE_CARD, expiry_month=12, expiry_year=2040, cvc="123")
    with pytest.raises(ProviderError):
        world.run(world.treasury.payments.pay(intent.payment_intent_lookup_id, card))
    assert world.state() == before
    assert world.provider.calls == ["authorize", "void"]
