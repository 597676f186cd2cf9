"""Every money-moving call, under every fault that defeats all of the Stripe SDK's retries.

A treasury with the Stripe card provider, on SQLite and on PostgreSQL, served by the HTTP app
(aiohttp's test client), talks to localstripe through the test bed's fault-injecting proxy
(:func:`~treasury_pytest.localstripe.localstripe_proxy`), its request timeout one second. For
each call (paying an intent on its hosted page with automatic and with manual capture, a
capture, a cancel, a partial refund, saving a card on a PMTI's confirm URL, charging a saved
card by creating an intent with its ``card_token``) the call's main POST at Stripe gets one
fault on the SDK's first try and on each of its :data:`MAX_NETWORK_RETRIES` retries: the
connection dropped before forwarding, the answer lost after Stripe acted, a 500, a 429, the
answer held past the timeout (Stripe acted), or the request delivered twice (the one fault
the first call survives).

The call then answers 502 ``provider_error``, and the client does what docs/payments.md,
"After a 502", asks: the same request again, with the same ``Idempotency-Key`` where the
call takes one (paying again with the same card; submitting the same card again). A refund
Stripe never saw (no try reached it) stays pending on that retry, which only asks what the first
call did; once the resolution job has asked over its window and failed it as never made, the
next retry makes a new refund. Once the due jobs have run:

- localstripe's charges and refunds equal the treasury's
  (:func:`~treasury_core.testing.provider_agreement.provider_disagreements`);
- each intent has exactly one PaymentIntent at localstripe, the one it records, holding what
  it records (captured, held, or released once cancelled), and localstripe's refunds of it
  add up to ours;
- a saved card is one PaymentMethod attached to one Customer;
- nothing of ours is left pending: no refund, no resolution job, no card difference, and the
  ledger's invariants hold.

localstripe here is the module's own, so that the stand-ins' walks through every
PaymentIntent stay short next to the one-second timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import stripe
from aiohttp.test_utils import TestClient, TestServer

from tests.conftest import running_localstripe
from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.payments.card_differences import CardDifferenceStatus
from treasury_core.payments.intents import IntentFilter, IntentStatus, PaymentIntent
from treasury_core.payments.records import Refund, RefundStatus
from treasury_core.services.payments.vocabulary import RESOLVE_CHARGE, RESOLVE_REFUND, owner_tag
from treasury_core.testing import FakeClock, check_invariants
from treasury_core.testing.provider_agreement import provider_disagreements
from treasury_pytest.faults import Fault, FaultProxy, FaultRule
from treasury_pytest.localstripe import localstripe_proxy
from treasury_stripe.card_provider import MAX_NETWORK_RETRIES

Client = TestClient[Any, Any]
Answer = tuple[int, Any]

KEY = "sk_test_fault_matrix"
#: The Stripe provider's request timeout: a held answer past it costs a second per try.
TIMEOUT_SECONDS = 1.0
#: A fault on the SDK's first try and on each retry: the call itself fails.
EVERY_TRY = MAX_NETWORK_RETRIES + 1
AMOUNT = 1_000
REFUNDED = 300

INTENT = "/api/v1/payments/intent"
CAPTURE = "/api/v1/payments/intent/capture"
CANCEL = "/api/v1/payments/intent/cancel-authorization"
REFUND = "/api/v1/payments/intent/refund"
PMTI = "/api/v1/payment_method_token_intent"
CARD = {
    "cardholder_name": "Ada Lovelace",
    "card_number": "4242424242424242",
    "expiry_month": 12,
    "expiry_year": 2040,
    "cvc": "123",
}

FAULTS = {
    "drop": Fault.drop(),
    "lose_answer": Fault.lose_answer(),
    "server_error": Fault.server_error(500),
    "rate_limited": Fault.rate_limited(),
    "delay": Fault.delay(2 * TIMEOUT_SECONDS),
    "duplicate": Fault.duplicate(),
}
#: The fault after which the first call still succeeds: its client got the first answer.
SURVIVED = "duplicate"
#: The fault after which the provider certainly did nothing (Stripe says so with a 429).
NOTHING_DONE = "rate_limited"
#: The faults after which Stripe did nothing, though the client cannot know it: no try
#: reached Stripe. A refund's retry only asks what the first call did, so it waits, pending,
#: until the resolution job, after asking over its window, fails the refund as never made;
#: the retry after that makes a new refund.
NEVER_REACHED = frozenset({"drop", "server_error"})
#: The minutes between the resolution job's asks before it takes "not found" as never made.
ASKING_WINDOW = (1, 2, 4)

#: The state of its PaymentIntent at Stripe each final state of an intent calls for.
STRIPE_STATUS = {
    IntentStatus.PROCESSED: "succeeded",
    IntentStatus.AUTHORIZED: "requires_capture",
    IntentStatus.CANCELLED: "canceled",
}


@dataclass
class Bed:
    """The treasury over HTTP, its proxy to localstripe, and one company."""

    client: Client
    treasury: Treasury
    proxy: FaultProxy
    #: localstripe read directly, neither through the proxy nor the provider under test.
    stripe: stripe.StripeClient
    auth: dict[str, str]
    company: int
    account: int
    email: str
    #: The start of the test in wall-clock time, which localstripe dates its objects by.
    since: datetime
    #: The treasury's business clock (its jobs fall due by it).
    clock: FakeClock

    async def post(
        self, path: str, body: dict[str, Any], *, key: str | None = None, merchant: bool = True
    ) -> Answer:
        """POST ``body`` as the merchant (with ``key`` as its ``Idempotency-Key``), or as the
        customer's browser (``merchant`` false: no credentials)."""
        headers = dict(self.auth) if merchant else {}
        if key is not None:
            headers["Idempotency-Key"] = key
        response = await self.client.post(path, json=body, headers=headers)
        return response.status, await response.json()

    async def intent(self, capture: str, **extra: Any) -> dict[str, Any]:
        body = {
            "account_id": self.account,
            "billing_amount": AMOUNT,
            "billing_currency": "USD",
            "payment_type": "Card Payment",
            "capture_method": capture,
            "merchant_reference": f"order-{uuid.uuid4().hex[:8]}",
            **extra,
        }
        status, intent = await self.post(INTENT, body, key=f"create-{uuid.uuid4().hex}")
        assert status == 200, intent
        return dict(intent)

    def pay(self, intent: dict[str, Any]) -> Callable[[], Awaitable[Answer]]:
        """The customer's payment on the hosted page (which takes no ``Idempotency-Key``:
        the same card again is the same attempt)."""
        path = f"/pay/{intent['payment_intent_lookup_id']}"
        return lambda: self.post(path, CARD, merchant=False)

    async def paid(self, capture: str) -> dict[str, Any]:
        intent = await self.intent(capture)
        status, paid = await self.pay(intent)()
        assert status == 200, paid
        return intent

    async def pmti(self) -> str:
        """A PMTI of :attr:`email`; its confirm path."""
        body = {
            "account_id": self.account,
            "payment_type": "Tokenization",
            "customer_email": self.email,
            "customer_phone_number": "+447700900123",
        }
        status, pmti = await self.post(PMTI, body)
        assert status == 200, pmti
        confirm: str = urlsplit(pmti["latest_version"]["confirm_endpoint_url"]).path
        return confirm

    async def saved_card(self) -> str:
        status, saved = await self.post(await self.pmti(), CARD, merchant=False)
        assert status == 200 and saved["status"] == "succeeded", saved
        token: str = saved["payment_method_token"]
        return token


# --- the calls: each prepared without faults, then its request, retried as it is ------------


@dataclass(frozen=True)
class MoneyCall:
    """A call through the HTTP app and the Stripe POST it hinges on."""

    #: The call's main request at Stripe (a path regular expression), where the faults go.
    stripe_path: str
    #: Makes what the call needs, without faults; answers the call's request, ready to send.
    prepare: Callable[[Bed], Awaitable[Callable[[], Awaitable[Answer]]]]
    #: The ``status`` of the call's successful answer.
    succeeded: str
    #: The record a 502 names (``error.resource``: its ``object`` and ``status``), if any.
    left: tuple[str, str] | None
    #: The record's ``status`` when the provider certainly did nothing, if that ends it (the
    #: retry then makes a new one); ``None`` when it stays as :attr:`left` says.
    ended: str | None = None


async def _pay(bed: Bed) -> Callable[[], Awaitable[Answer]]:
    return bed.pay(await bed.intent("automatic"))


async def _authorize(bed: Bed) -> Callable[[], Awaitable[Answer]]:
    return bed.pay(await bed.intent("manual"))


async def _capture(bed: Bed) -> Callable[[], Awaitable[Answer]]:
    body = {"payment_intent_id": (await bed.paid("manual"))["id"]}
    return lambda: bed.post(CAPTURE, body, key="capture-1")


async def _cancel(bed: Bed) -> Callable[[], Awaitable[Answer]]:
    body = {"payment_intent_id": (await bed.paid("manual"))["id"]}
    return lambda: bed.post(CANCEL, body, key="cancel-1")


async def _refund(bed: Bed) -> Callable[[], Awaitable[Answer]]:
    body = {"payment_intent_id": (await bed.paid("automatic"))["id"], "amount": REFUNDED}
    return lambda: bed.post(REFUND, body, key="refund-1")


async def _save_card(bed: Bed) -> Callable[[], Awaitable[Answer]]:
    confirm = await bed.pmti()
    return lambda: bed.post(confirm, CARD, merchant=False)


async def _charge_saved_card(bed: Bed) -> Callable[[], Awaitable[Answer]]:
    token = await bed.saved_card()
    body = {
        "account_id": bed.account,
        "billing_amount": AMOUNT,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "order-saved",
        "card_token": token,
    }
    return lambda: bed.post(INTENT, body, key="charge-1")


_INTENTS = r"/v1/payment_intents"
_ONE_INTENT = r"/v1/payment_intents/pi_\w+"
_WAITING = ("payment_intent", "INITIALIZED")
_HELD = ("payment_intent", "AUTHORIZED")
CALLS = {
    "pay": MoneyCall(_INTENTS, _pay, "PROCESSED", _WAITING),
    "authorize": MoneyCall(_INTENTS, _authorize, "AUTHORIZED", _WAITING),
    "capture": MoneyCall(f"{_ONE_INTENT}/capture", _capture, "PROCESSED", _HELD),
    "cancel": MoneyCall(f"{_ONE_INTENT}/cancel", _cancel, "CANCELLED", _HELD),
    "refund": MoneyCall(r"/v1/refunds", _refund, "succeeded", ("refund", "pending"), "failed"),
    "save_card": MoneyCall(r"/v1/payment_methods/pm_\w+/attach", _save_card, "succeeded", None),
    "charge_saved_card": MoneyCall(_INTENTS, _charge_saved_card, "PROCESSED", _WAITING),
}


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def matrix_localstripe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_localstripe(tmp_path_factory.mktemp("fault-matrix")) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'treasury.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def bed(matrix_localstripe: str, database_url: str) -> AsyncIterator[Bed]:
    since = datetime.now(UTC) - timedelta(hours=1)
    # Business time starts at the wall clock's, so that our intents fall in the window of
    # localstripe's charges that the invariant compares.
    clock = FakeClock(datetime.now(UTC))
    with localstripe_proxy(matrix_localstripe) as proxy:
        config = TreasuryConfig(
            database_url=database_url,
            pool_size=4,
            card_provider="stripe",
            stripe_api_key=KEY,
            stripe_api_base=proxy.url,
            stripe_timeout_seconds=TIMEOUT_SECONDS,
        )
        treasury = bootstrap(config, clock=clock, wall_clock=clock)
        client = TestClient(TestServer(create_app(treasury, close_treasury=True)))
        await client.start_server()
        try:
            created = await treasury.companies.create_company("Acme")
            yield Bed(
                client=client,
                treasury=treasury,
                proxy=proxy,
                stripe=stripe.StripeClient(KEY, base_addresses={"api": matrix_localstripe}),
                auth={"Authorization": f"Bearer {created.secret_key}"},
                company=created.company.id,
                account=created.merchant_account.id,
                email=f"ada-{uuid.uuid4().hex[:12]}@example.com",
                since=since,
                clock=clock,
            )
        finally:
            await client.close()


# --- the matrix -----------------------------------------------------------------------------


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("call", list(CALLS))
async def test_a_call_whose_every_try_fails_is_retried_to_agreement(
    bed: Bed, call: str, fault: str
) -> None:
    money_call = CALLS[call]
    request = await money_call.prepare(bed)
    bed.proxy.set_plan([FaultRule(FAULTS[fault], "POST", money_call.stripe_path, times=EVERY_TRY)])
    status, first = await request()
    bed.proxy.wait_idle()
    faulted = [e for e in bed.proxy.exchanges("POST", money_call.stripe_path) if e.fault]
    # Every try of the SDK met the fault; a 429 it does not retry, a duplicate it need not.
    assert len(faulted) == (1 if fault in (SURVIVED, NOTHING_DONE) else EVERY_TRY), faulted
    bed.proxy.set_plan(None)
    if fault == SURVIVED:
        assert (status, first["status"]) == (200, money_call.succeeded), first
    else:
        assert (status, first["error"]["code"]) == (502, "provider_error"), first
        left = first["error"].get("resource")
        ended = fault == NOTHING_DONE and money_call.ended is not None
        wanted = money_call.left
        if wanted is not None and ended:
            wanted = (wanted[0], str(money_call.ended))
        assert (None if left is None else (left["object"], left["status"])) == wanted, first
        status, retried = await request()
        if call == "refund" and fault in NEVER_REACHED:
            # Nothing found at Stripe yet: the refund stays pending, named again.
            assert status == 502, retried
            assert retried["error"]["resource"] == left, retried
            await bed.treasury.jobs.run_all_due()
            for minutes in ASKING_WINDOW:
                bed.clock.advance(minutes * 60)
                await bed.treasury.jobs.run_all_due()
            bed.proxy.wait_idle()
            [never_made] = await _refunds(bed, (await _intents(bed))[0])
            assert (never_made.status, never_made.failure_reason) == (
                RefundStatus.FAILED,
                "not_made_by_provider",
            )
            ended = True
            status, retried = await request()
        assert (status, retried["status"]) == (200, money_call.succeeded), retried
        if left is not None and "id" in retried:
            # The retry resumed the record the 502 named, unless that record had ended.
            assert (retried["id"] == left["id"]) is not ended, (left, retried)
    await bed.treasury.jobs.run_all_due()
    bed.proxy.wait_idle()
    await assert_agreement(bed)


async def assert_agreement(bed: Bed) -> None:
    """localstripe and the treasury agree, and nothing of ours waits (see the module)."""
    treasury = bed.treasury
    found = await provider_disagreements(
        treasury.storage, treasury.payments.provider, [bed.company], bed.since
    )
    assert found == [], found
    intents = await _intents(bed)
    assert len(intents) <= 1, f"the retry made another intent: {intents}"
    at_stripe = list(bed.stripe.v1.payment_intents.list({"limit": 100}).auto_paging_iter())
    for intent in intents:
        tag = owner_tag(intent)
        charges = [pi for pi in at_stripe if _metadata(pi).get("treasury_tag") == tag]
        # One PaymentIntent made for the intent, whatever the retries: the one it records,
        # holding what it records (a capture, a hold, or nothing once cancelled).
        made = [(pi.id, pi.status) for pi in charges]
        wanted = [(intent.provider_reference, STRIPE_STATUS[intent.status])]
        assert made == wanted, (
            f"intent {intent.id} is {intent.status.value}; localstripe has {made}"
        )
        refunded_there = sum(
            refund.amount
            for pi in charges
            for refund in bed.stripe.v1.refunds.list({"payment_intent": pi.id}).data
            if refund.status == "succeeded"
        )
        ours = await _refunds(bed, intent)
        refunded_here = sum(r.amount for r in ours if r.status is RefundStatus.SUCCEEDED)
        assert refunded_there == refunded_here == intent.amount_refunded
        assert [r.id for r in ours if r.status is RefundStatus.PENDING] == []
    customers = bed.stripe.v1.customers.list({"email": bed.email}).data
    assert len(customers) <= 1, f"the retry made another Customer: {customers}"
    for customer in customers:
        methods = bed.stripe.v1.payment_methods.list({"customer": customer.id, "type": "card"})
        assert len(methods.data) == 1, f"the retry saved the card again: {methods.data}"
    await _assert_nothing_waits(bed)


def _metadata(intent: stripe.PaymentIntent) -> dict[str, Any]:
    return intent.metadata.to_dict() if intent.metadata is not None else {}


async def _intents(bed: Bed) -> list[PaymentIntent]:
    company = bed.company
    return await bed.treasury.storage.run(
        lambda uow: uow.intents.list(company, IntentFilter(), 100, None), write=False
    )


async def _refunds(bed: Bed, intent: PaymentIntent) -> list[Refund]:
    return await bed.treasury.payments.refunds(intent.company_id, intent.id)


async def _assert_nothing_waits(bed: Bed) -> None:
    treasury = bed.treasury
    later = treasury.clock.now() + timedelta(days=365)
    jobs = await treasury.storage.run(lambda uow: uow.jobs.due(later, 1_000), write=False)
    asking = [job for job in jobs if job.kind in (RESOLVE_CHARGE, RESOLVE_REFUND)]
    assert asking == [], f"still asking the provider: {asking}"
    differences = await treasury.card_reconciliation.differences(CardDifferenceStatus.OPEN)
    assert differences == [], differences
    check_invariants(treasury.storage)
