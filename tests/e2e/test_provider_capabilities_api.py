"""Over HTTP: what the card provider says it cannot do is refused with 400, nothing changed.

The server runs on the sandbox provider with capabilities switched off
(tests/integration/test_provider_capabilities.py's ``LimitedProvider``), on SQLite and
PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Tenant
from tests.e2e.test_payments_api import (
    CAPTURE,
    INTENT,
    REFUND,
    THREE_D_SECURE,
    Client,
    Outbox,
    create,
    error_of,
    lookup,
    pay,
    post,
)
from tests.integration.test_provider_capabilities import LimitedProvider
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing import check_invariants
from treasury_core.testing.fakes.clock import FakeClock

CODE = "provider_capability_unsupported"


@pytest.fixture
def provider(clock: FakeClock) -> LimitedProvider:
    return LimitedProvider(clock)


@pytest.fixture
def treasury(database_url: str, clock: FakeClock, provider: LimitedProvider) -> Treasury:
    return bootstrap(
        TreasuryConfig(database_url=database_url, pool_size=4),
        clock=clock,
        wall_clock=clock,
        card_provider=provider,
    )


def refusal(payload: Any, param: str | None = None) -> None:
    error = error_of(payload)
    assert (error["type"], error["code"]) == ("invalid_request_error", CODE)
    assert error.get("param") == param
    assert error["message"]


async def count(client: Client, tenant: Tenant) -> int:
    response = await client.get(f"{INTENT}s/count", headers=tenant.auth)
    payload = await response.json()
    assert response.status == 200, payload
    return int(payload["count"])


async def test_manual_capture_and_capture(
    client: Client, tenant: Tenant, treasury: Treasury, provider: LimitedProvider
) -> None:
    outbox = Outbox(treasury, tenant.company_id)
    held = await create(client, tenant, capture_method="manual")
    await pay(client, held["payment_intent_lookup_id"])
    provider.manual_capture = False
    provider.calls.clear()
    outbox.new()
    intents = await count(client, tenant)

    refusal(await create(client, tenant, 400, capture_method="manual"), "capture_method")
    refusal(await post(client, tenant, CAPTURE, {"payment_intent_id": held["id"]}, 400))
    assert (await lookup(client, tenant, held))["status"] == "AUTHORIZED"
    assert await count(client, tenant) == intents
    assert outbox.new() == []
    assert provider.calls == []
    check_invariants(treasury.storage)


async def test_refunds_and_partial_refunds(
    client: Client, tenant: Tenant, treasury: Treasury, provider: LimitedProvider
) -> None:
    intent = await create(client, tenant)
    await pay(client, intent["payment_intent_lookup_id"])
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    provider.calls.clear()

    provider.refunds = False
    refusal(await post(client, tenant, REFUND, {"payment_intent_id": intent["id"]}, 400))
    provider.refunds, provider.partial_refunds = True, False
    body = {"payment_intent_id": intent["id"], "amount": 2_500}
    refusal(await post(client, tenant, REFUND, body, 400), "amount")
    assert (await lookup(client, tenant, intent))["amount_refunded"] == 0
    assert outbox.new() == []
    assert provider.calls == []

    whole = await post(client, tenant, REFUND, {"payment_intent_id": intent["id"]})
    assert (whole["amount"], whole["status"]) == (10_000, "succeeded")
    check_invariants(treasury.storage)


async def test_a_challenge_the_provider_cannot_finish(
    client: Client, tenant: Tenant, treasury: Treasury, provider: LimitedProvider
) -> None:
    intent = await create(client, tenant)
    lookup_id = intent["payment_intent_lookup_id"]
    await pay(client, lookup_id, THREE_D_SECURE)
    provider.three_d_secure = False
    provider.calls.clear()
    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    response = await client.post(f"/pay/{lookup_id}/challenge", json={"outcome": "pass"})
    refusal(await response.json())
    assert response.status == 400
    assert (await lookup(client, tenant, intent))["status"] == "INITIALIZED"
    assert outbox.new() == []
    assert provider.calls == []
