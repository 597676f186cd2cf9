"""Bad input through the Python API is a :class:`TreasuryError` naming the parameter, and changes
nothing: awaited on the in-memory storage, and through :class:`BlockingTreasury`.

An embedding application's ``except TreasuryError`` (docs/guides/embedding.md) must answer a
bad value as the HTTP app does, with 400, not let pydantic's own error through as a 500.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from treasury_core import (
    BlockingTreasury,
    CreateDepositRequest,
    CreateIntentRequest,
    CreateTransferRequest,
    CreateWalletRequest,
    CreateWebhookEndpointRequest,
    CreateWithdrawalRequest,
    Deposit,
    ErrorKind,
    RegisterBankAccountRequest,
    Transfer,
    Treasury,
    TreasuryConfig,
    TreasuryError,
    ValidationFailed,
    Withdrawal,
    bootstrap,
    http_status,
)
from treasury_core.interface.errors import error_body
from treasury_core.ports.card_provider import CardData
from treasury_core.testing import FakeClock, MemoryStorage


class World:
    """A company with a funded wallet, a second wallet, a bank account and a captured payment."""

    def __init__(self, treasury: Treasury) -> None:
        self.treasury = treasury
        self.company = 0
        self.account = 0
        self.source = ""
        self.target = ""
        self.bank_account = ""
        self.intent = 0

    async def build(self) -> World:
        t = self.treasury
        created = await t.companies.create_company("Acme")
        self.company, self.account = created.company.id, created.merchant_account.id
        self.source = (await t.wallets.create(self.company, _wallet("A"))).id
        self.target = (await t.wallets.create(self.company, _wallet("B"))).id
        deposit = await t.deposits.create(
            self.company,
            CreateDepositRequest(wallet_id=self.source, from_amount=10_000, from_currency_id="USD"),
        )
        await t.deposits.complete(self.company, deposit.id)
        self.bank_account = (
            await t.bank_accounts.register(
                self.company,
                RegisterBankAccountRequest(
                    bank_name="Bank",
                    account_name="Ops",
                    account_number="12345678",
                    routing_number="021000021",
                    currency_id="USD",
                ),
            )
        ).id
        intent = await t.payments.create(
            self.company,
            CreateIntentRequest(
                account_id=self.account,
                billing_amount=1_000,
                billing_currency="USD",
                payment_type="Card Payment",
            ),
        )
        await t.payments.pay(
            intent.payment_intent_lookup_id, CardData("4242424242424242", 12, 2045, "123")
        )
        self.intent = intent.id
        return self

    async def state(self) -> tuple[Any, ...]:
        """Everything a bad call could have changed."""
        t, company = self.treasury, self.company
        return (
            await t.wallets.all(company),
            await t.wallets.all_balances(company),
            (await t.records.list(Deposit, company)).items,
            (await t.records.list(Transfer, company)).items,
            (await t.records.list(Withdrawal, company)).items,
            await t.payments.get(company, self.intent),
            await t.payments.refunds(company, self.intent),
            await t.notifications.endpoints(company),
        )


def _wallet(name: str) -> CreateWalletRequest:
    return CreateWalletRequest(name=name, currency_id="USD")


#: A bad call, the ``param`` and the message it is refused with. Each is what the HTTP app
#: answers for the same values (tests/e2e/test_python_api_errors_match_http.py).
Call = Callable[[World], Any]
BAD_CALLS: list[tuple[str, Call, str, str]] = [
    (
        "wallet without currency",
        lambda w: w.treasury.wallets.create(w.company, CreateWalletRequest(name="C")),  # type: ignore[call-arg]
        "currency_id",
        "Missing required parameter: currency_id",
    ),
    (
        "wallet currency too short",
        lambda w: w.treasury.wallets.create(
            w.company, CreateWalletRequest(name="C", currency_id="US")
        ),
        "currency_id",
        "Invalid currency_id: String should have at least 3 characters",
    ),
    (
        "deposit amount zero",
        lambda w: w.treasury.deposits.create(
            w.company,
            CreateDepositRequest(wallet_id=w.source, from_amount=0, from_currency_id="USD"),
        ),
        "from_amount",
        "Invalid from_amount: Input should be greater than 0",
    ),
    (
        "transfer amount a string",
        lambda w: w.treasury.transfers.create(
            w.company,
            CreateTransferRequest(
                from_wallet_id=w.source,
                to_wallet_id=w.target,
                from_amount="100",  # type: ignore[arg-type]
            ),
        ),
        "from_amount",
        "Invalid from_amount: Input should be a valid integer",
    ),
    (
        "withdrawal with an unknown field",
        lambda w: w.treasury.withdrawals.create(
            w.company,
            CreateWithdrawalRequest(
                wallet_id=w.source,
                from_amount=100,
                from_currency_id="USD",
                bank_account_id=w.bank_account,
                fee=0,  # type: ignore[call-arg]
            ),
        ),
        "fee",
        "Received unknown parameter: fee",
    ),
    (
        "bank account number blank",
        lambda w: w.treasury.bank_accounts.register(
            w.company,
            RegisterBankAccountRequest(
                bank_name="Bank",
                account_name="Ops",
                account_number="",
                routing_number="1",
                currency_id="USD",
            ),
        ),
        "account_number",
        "Invalid account_number: Value should have at least 1 item after validation, not 0",
    ),
    (
        "intent with an unknown payment type",
        lambda w: w.treasury.payments.create(
            w.company,
            CreateIntentRequest(
                account_id=w.account,
                billing_amount=100,
                billing_currency="USD",
                payment_type="Bitcoin",  # type: ignore[arg-type]
            ),
        ),
        "payment_type",
        "Invalid payment_type: Input should be 'Card Payment', 'Virtual Card', 'MOTO' or "
        "'Tokenization'",
    ),
    (
        "refund of nothing",
        lambda w: w.treasury.payments.refund(w.company, w.intent, amount=0),
        "amount",
        "Invalid amount: Input should be greater than 0",
    ),
    (
        "refund reason too long",
        lambda w: w.treasury.payments.refund(w.company, w.intent, reason="r" * 256),
        "reason",
        "Invalid reason: Value should have at most 255 items after validation, not 256",
    ),
    (
        "capture of intent 0",
        lambda w: w.treasury.payments.capture(w.company, 0),
        "payment_intent_id",
        "Invalid payment_intent_id: Input should be greater than 0",
    ),
    (
        "webhook endpoint without a URL",
        lambda w: w.treasury.notifications.create_endpoint(
            w.company, CreateWebhookEndpointRequest(url="shop.example")
        ),
        "url",
        "Invalid url: must be an http:// or https:// URL with a host",
    ),
    (
        "metadata value not a string",
        lambda w: w.treasury.wallets.update_metadata(w.company, w.source, {"note": 5}),
        "metadata.note",
        "Invalid metadata.note: Input should be a valid string",
    ),
    (
        "sandbox: a deposit completed with nothing",
        lambda w: w.treasury.deposits.complete(w.company, "dep_x", amount=-1),
        "amount",
        "Invalid amount: Input should be greater than 0",
    ),
    (
        "sandbox: a transfer failed with a two-line message",
        lambda w: w.treasury.transfers.fail(w.company, "trf_x", message="a\nb"),
        "message",
        "Invalid message: must not contain control characters, bidirectional controls or "
        "invalid Unicode",
    ),
    (
        "sandbox: money arriving at a virtual account is none",
        lambda w: w.treasury.virtual_accounts.incoming(w.company, "va_x", 0),
        "amount",
        "Invalid amount: Input should be greater than 0",
    ),
]
IDS = [name for name, *_ in BAD_CALLS]


def _in_memory() -> Treasury:
    clock = FakeClock()
    config = TreasuryConfig(database_url="memory://")
    return bootstrap(config, storage=MemoryStorage(), clock=clock, wall_clock=clock)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    treasury = _in_memory()
    try:
        yield await World(treasury).build()
    finally:
        treasury.close()


async def _invoke(call: Call, world: World) -> None:
    # A model built with bad values raises at once, before any service is called.
    result = call(world)
    if asyncio.iscoroutine(result):
        await result


@pytest.mark.parametrize(("name", "call", "param", "message"), BAD_CALLS, ids=IDS)
async def test_bad_input_is_a_treasury_error_naming_the_parameter(
    world: World, name: str, call: Call, param: str, message: str
) -> None:
    before = await world.state()
    try:
        await _invoke(call, world)
    except TreasuryError as exc:  # what an embedding app catches
        caught: TreasuryError = exc
    else:
        pytest.fail(f"{name}: accepted")
    assert isinstance(caught, ValidationFailed)
    assert (caught.param, caught.message) == (param, message)
    assert caught.kind is ErrorKind.INVALID_REQUEST
    assert http_status(caught) == 400
    assert error_body(caught)["error"]["param"] == param
    assert await world.state() == before


@pytest.fixture
def blocking() -> Iterator[tuple[BlockingTreasury, World]]:
    with BlockingTreasury(_in_memory) as hosted:
        yield hosted, hosted.run(World(hosted.treasury).build())


def test_bad_input_through_blocking_treasury_is_a_treasury_error(
    blocking: tuple[BlockingTreasury, World],
) -> None:
    hosted, world = blocking
    before = hosted.run(world.state())
    with pytest.raises(TreasuryError) as built:
        hosted.transfers.create(
            world.company,
            CreateTransferRequest(
                from_wallet_id=world.source, to_wallet_id=world.target, from_amount=-5
            ),
        )
    assert (built.value.param, built.value.message) == (
        "from_amount",
        "Invalid from_amount: Input should be greater than 0",
    )
    # Raw values passed to a service are checked on the hosted loop; the error crosses back.
    with pytest.raises(TreasuryError) as passed:
        hosted.payments.refund(world.company, world.intent, reason="a\x00b")
    assert isinstance(passed.value, ValidationFailed)
    assert passed.value.param == "reason"
    with pytest.raises(ValidationFailed) as merged:
        hosted.payment_links.update_metadata(world.company, world.intent, {"k": ["v"]})
    assert merged.value.param == "metadata.k"
    assert hosted.run(world.state()) == before
