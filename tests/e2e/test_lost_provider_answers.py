"""A card provider call whose answer was lost, retried by the client with the same
``Idempotency-Key``: the retry resumes what the first request started (the same intent, refund
or capture, under the same provider key), so the provider makes nothing twice.

The provider is the testing kit's :class:`~treasury_core.testing.FlakyCardProvider`, which keeps
keys as Stripe does (a repeated key answers the first outcome) and loses the answer of a chosen
call after acting, as a connection dropped after the provider's work does. Over HTTP, on SQLite
and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.e2e.test_auth_and_idempotency import INTENT, intent_body, intent_count, saved_card
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing import FlakyCardProvider
from treasury_core.testing.fakes.card_providers import Call
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]
CAPTURE = "/api/v1/payments/intent/capture"
REFUND = "/api/v1/payments/intent/refund"


@pytest.fixture
def provider(clock: FakeClock) -> FlakyCardProvider:
    return FlakyCardProvider(clock)


@pytest.fixture
def treasury(database_url: str, clock: FakeClock, provider: FlakyCardProvider) -> Treasury:
    return bootstrap(
        TreasuryConfig(database_url=database_url, pool_size=4),
        clock=clock,
        wall_clock=clock,
        card_provider=provider,
    )


async def _post(client: Client, tenant: Tenant, path: str, body: dict[str, Any], key: str) -> Any:
    response = await client.post(path, json=body, headers={**tenant.auth, "Idempotency-Key": key})
    return response.status, await response.json()


async def test_a_charge_whose_answer_was_lost_is_resumed_not_repeated(
    client: Client, tenant: Tenant, provider: FlakyCardProvider
) -> None:
    body = intent_body(tenant, card_token=await saved_card(client, tenant))
    provider.lose_answers(Call.AUTHORIZE)
    status, lost = await _post(client, tenant, INTENT, body, "charge-1")
    assert status == 502, lost
    left = lost["error"]["resource"]
    assert left["object"] == "payment_intent"
    assert left["status"] == "INITIALIZED"
    status, charged = await _post(client, tenant, INTENT, body, "charge-1")
    assert status == 200, charged
    assert (charged["id"], charged["status"]) == (left["id"], "PROCESSED")
    [charge] = provider.charges.values()
    assert charge.owner is not None
    assert charge.owner.payment_intent_id == left["id"]
    assert await intent_count(client, tenant) == 1
    # Answered now: the next retry is a replay of that answer.
    again = await client.post(
        INTENT, json=body, headers={**tenant.auth, "Idempotency-Key": "charge-1"}
    )
    assert again.headers["Idempotent-Replayed"] == "true"
    assert (await again.json())["id"] == left["id"]


async def _charged(client: Client, tenant: Tenant, **extra: Any) -> dict[str, Any]:
    body = intent_body(tenant, card_token=await saved_card(client, tenant), **extra)
    status, intent = await _post(client, tenant, INTENT, body, f"setup-{extra}")
    assert status == 200, intent
    return dict(intent)


async def test_a_refund_whose_answer_was_lost_is_resumed_not_repeated(
    client: Client, tenant: Tenant, provider: FlakyCardProvider
) -> None:
    intent = await _charged(client, tenant)
    body = {"payment_intent_id": intent["id"], "amount": 161}
    provider.lose_answers(Call.REFUND)
    status, lost = await _post(client, tenant, REFUND, body, "refund-1")
    assert status == 502, lost
    left = lost["error"]["resource"]
    assert (left["object"], left["status"]) == ("refund", "pending")
    status, refund = await _post(client, tenant, REFUND, body, "refund-1")
    assert status == 200, refund
    assert (refund["id"], refund["status"]) == (left["id"], "succeeded")
    assert [r.amount for r in provider.refunds.values()] == [161]
    listed = await client.get(f"/api/v1/payments/intent/{intent['id']}", headers=tenant.auth)
    assert (await listed.json())["amount_refunded"] == 161


async def test_a_refund_the_provider_did_not_act_on_fails_at_once(
    client: Client, tenant: Tenant, provider: FlakyCardProvider
) -> None:
    intent = await _charged(client, tenant)
    body = {"payment_intent_id": intent["id"], "amount": 300}
    provider.refuse_calls(Call.REFUND)
    status, refused = await _post(client, tenant, REFUND, body, "refund-2")
    assert status == 502, refused
    left = refused["error"]["resource"]
    assert (left["object"], left["status"]) == ("refund", "failed")
    shown = await client.get(f"/api/v1/payments/intent/{intent['id']}", headers=tenant.auth)
    assert (await shown.json())["amount_refunded"] == 0
    # Nothing happened, so the retry is a refund of its own, made once.
    status, refund = await _post(client, tenant, REFUND, body, "refund-2")
    assert status == 200, refund
    assert refund["id"] != left["id"]
    assert refund["status"] == "succeeded"
    assert [r.amount for r in provider.refunds.values()] == [300]


async def test_a_capture_whose_answer_was_lost_answers_the_captured_intent(
    client: Client, tenant: Tenant, provider: FlakyCardProvider
) -> None:
    intent = await _charged(client, tenant, capture_method="manual")
    assert intent["status"] == "AUTHORIZED"
    body = {"payment_intent_id": intent["id"]}
    provider.lose_answers(Call.CAPTURE)
    status, lost = await _post(client, tenant, CAPTURE, body, "capture-1")
    assert status == 502, lost
    assert lost["error"]["resource"] == {
        "object": "payment_intent",
        "id": intent["id"],
        "status": "AUTHORIZED",
    }
    status, captured = await _post(client, tenant, CAPTURE, body, "capture-1")
    assert status == 200, captured
    assert captured["status"] == "PROCESSED"
    [charge] = provider.charges.values()
    assert charge.amount_captured == charge.amount
