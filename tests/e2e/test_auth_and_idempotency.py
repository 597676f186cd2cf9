"""Bearer keys (decisions.md "Authentication and tenancy") and Idempotency-Key replays."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.companies import KeyKind
from treasury_core.interface.idempotency import StoredResponse, fingerprint
from treasury_core.services.idempotency import Claim

Client = TestClient[Any, Any]
ROUTES = [
    ("GET", "/api/v1/wallets"),
    ("GET", "/api/v1/wallets/balances"),
    ("GET", "/api/v1/wallet/wal_x"),
    ("GET", "/api/v1/wallet/wal_x/balance"),
    ("POST", "/api/v1/wallet"),
    ("GET", "/api/v1/currencies"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer",
        "Bearer ",
        "Basic abc",
        "Bearer sk_unknownunknownunknown",
        "Bearer nonsense",
        "sk_x",
    ],
)
async def test_missing_or_bad_keys_are_401(
    client: Client, method: str, path: str, header: str | None
) -> None:
    headers = {"Authorization": header} if header is not None else {}
    response = await client.request(method, path, headers=headers, json={})
    assert response.status == 401
    error = (await response.json())["error"]
    assert error["type"] == "authentication_error"


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_publishable_keys_are_403_on_secret_routes(
    client: Client, tenant: Tenant, method: str, path: str
) -> None:
    response = await client.request(method, path, headers=tenant.publishable_auth, json={})
    assert response.status == 403
    assert (await response.json())["error"]["type"] == "permission_error"


async def test_revoked_keys_stop_working(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    principal = await treasury.companies.authenticate(tenant.secret_key)
    assert (await client.get("/api/v1/wallets", headers=tenant.auth)).status == 200
    await treasury.companies.revoke_api_key(principal.key_id)
    assert (await client.get("/api/v1/wallets", headers=tenant.auth)).status == 401


async def test_openapi_needs_no_key(client: Client) -> None:
    assert (await client.get("/api/v1/openapi.json")).status == 200


async def test_replay_returns_the_first_response(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    headers = {**tenant.auth, "Idempotency-Key": "create-main"}
    body = {"name": "Main", "currency_id": "USD"}
    first = await client.post("/api/v1/wallet", json=body, headers=headers)
    first_body = await first.read()
    for _ in range(3):
        again = await client.post("/api/v1/wallet", json=body, headers=headers)
        assert again.status == 200
        assert await again.read() == first_body
        assert again.headers["Idempotent-Replayed"] == "true"
    assert len((await treasury.wallets.list(tenant.company_id)).items) == 1


async def test_same_key_other_body_is_refused(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    headers = {**tenant.auth, "Idempotency-Key": "k"}
    await client.post("/api/v1/wallet", json={"name": "A", "currency_id": "USD"}, headers=headers)
    response = await client.post(
        "/api/v1/wallet", json={"name": "B", "currency_id": "USD"}, headers=headers
    )
    assert response.status == 400
    assert (await response.json())["error"]["type"] == "idempotency_error"
    assert len((await treasury.wallets.list(tenant.company_id)).items) == 1


async def test_keys_are_scoped_to_the_company(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    body = {"name": "A", "currency_id": "USD"}
    a = await client.post(
        "/api/v1/wallet", json=body, headers={**tenant.auth, "Idempotency-Key": "same"}
    )
    b = await client.post(
        "/api/v1/wallet", json=body, headers={**other_tenant.auth, "Idempotency-Key": "same"}
    )
    assert (await a.json())["id"] != (await b.json())["id"]
    assert "Idempotent-Replayed" not in b.headers


async def test_refusals_are_replayed_too(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    headers = {**tenant.auth, "Idempotency-Key": "bad-currency"}
    body = {"name": "A", "currency_id": "XXX"}
    first = await client.post("/api/v1/wallet", json=body, headers=headers)
    again = await client.post("/api/v1/wallet", json=body, headers=headers)
    assert first.status == again.status == 400
    assert await first.read() == await again.read()
    assert again.headers["Idempotent-Replayed"] == "true"


async def test_in_flight_key_is_409(client: Client, tenant: Tenant, treasury: Treasury) -> None:
    body = b'{"name": "A", "currency_id": "USD"}'
    # Another process holds the key: its claim is committed and its lease is running.
    await treasury.idempotency.claim(
        tenant.company_id,
        "busy",
        fingerprint("POST", "/api/v1/wallet", body),
        kind=KeyKind.SECRET,
    )
    response = await client.post(
        "/api/v1/wallet",
        data=body,
        headers={**tenant.auth, "Idempotency-Key": "busy", "Content-Type": "application/json"},
    )
    assert response.status == 409
    assert (await response.json())["error"]["type"] == "idempotency_error"
    assert len((await treasury.wallets.list(tenant.company_id)).items) == 0


async def test_an_abandoned_claim_is_taken_over_after_its_lease(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    body = b'{"name": "A", "currency_id": "USD"}'
    await treasury.idempotency.claim(
        tenant.company_id,
        "crashed",
        fingerprint("POST", "/api/v1/wallet", body),
        kind=KeyKind.SECRET,
    )
    treasury.clock.advance(treasury.config.idempotency_lease_seconds + 1)  # type: ignore[attr-defined]
    headers = {**tenant.auth, "Idempotency-Key": "crashed", "Content-Type": "application/json"}
    response = await client.post("/api/v1/wallet", data=body, headers=headers)
    assert response.status == 200
    replay = await client.post("/api/v1/wallet", data=body, headers=headers)
    assert await replay.read() == await response.read()


async def test_concurrent_requests_with_one_key_create_one_wallet(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    headers = {**tenant.auth, "Idempotency-Key": "race"}
    body = {"name": "A", "currency_id": "USD"}
    responses = await asyncio.gather(
        *(client.post("/api/v1/wallet", json=body, headers=headers) for _ in range(8))
    )
    statuses = sorted(r.status for r in responses)
    assert set(statuses) <= {200, 409}
    assert 200 in statuses
    ids = {(await r.json())["id"] for r in responses if r.status == 200}
    assert len(ids) == 1
    assert len((await treasury.wallets.list(tenant.company_id)).items) == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "clé-42", "key\u202e", "\xa0"])
async def test_malformed_keys_are_refused(client: Client, tenant: Tenant, key: str) -> None:
    response = await client.post(
        "/api/v1/wallet",
        json={"name": "A", "currency_id": "USD"},
        headers={**tenant.auth, "Idempotency-Key": key},
    )
    assert response.status == 400
    assert (await response.json())["error"]["param"] == "Idempotency-Key"


async def test_each_key_is_rate_limited(tmp_path: Any, clock: Any) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from treasury_aiohttp import create_app
    from treasury_core import TreasuryConfig, bootstrap

    treasury = bootstrap(
        TreasuryConfig(
            database_url=f"sqlite:///{tmp_path / 'limited.db'}",
            rate_limit_per_second=0.5,
            rate_limit_burst=2,
        ),
        clock=clock,
        wall_clock=clock,
    )
    created = await treasury.companies.create_company("Acme")
    client = TestClient(TestServer(create_app(treasury, close_treasury=True)))
    await client.start_server()
    try:
        secret = {"Authorization": f"Bearer {created.secret_key}"}
        statuses = [(await client.get("/api/v1/wallets", headers=secret)).status for _ in range(3)]
        assert statuses == [200, 200, 429]
        refused = await client.get("/api/v1/wallets", headers=secret)
        assert refused.headers["Retry-After"] in ("1", "2")
        body = await refused.json()
        assert body["error"]["type"] == "rate_limit_error"
        # Another key of the same company has its own bucket; unknown keys are not counted.
        publishable = {"Authorization": f"Bearer {created.publishable_key}"}
        lookup = "/api/v1/payments/intent?payment_intent_lookup_id=pil_none"
        assert (await client.get(lookup, headers=publishable)).status == 404  # not 429
        for _ in range(3):
            bad = await client.get("/api/v1/wallets", headers={"Authorization": "Bearer sk_nope"})
            assert bad.status == 401
    finally:
        await client.close()


# --- issue 20: a replay is authorized first, and keys are scoped to the key kind ---------------

INTENT = "/api/v1/payments/intent"
PMTI = "/api/v1/payment_method_token_intent"


def intent_body(tenant: Tenant, **extra: Any) -> dict[str, Any]:
    return {
        "account_id": tenant.account_id,
        "billing_amount": 1_000,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "merchant_reference": "order-1",
        **extra,
    }


def pmti_body(tenant: Tenant) -> dict[str, Any]:
    return {
        "account_id": tenant.account_id,
        "payment_type": "Tokenization",
        "customer_email": "ada@example.com",
        "customer_phone_number": "+447700900123",
    }


async def saved_card(client: Client, tenant: Tenant) -> str:
    """A ``pmt_`` token of an approved card, saved through the PMTI's confirm URL."""
    pmti = await (await client.post(PMTI, json=pmti_body(tenant), headers=tenant.auth)).json()
    confirm = urlsplit(pmti["latest_version"]["confirm_endpoint_url"]).path
    card = {
        "cardholder_name": "Ada Lovelace",
        "card_number": "4242424242424242",
        "expiry_month": 12,
        "expiry_year": 2030,
        "cvc": "123",
    }
    result = await (await client.post(confirm, json=card)).json()
    assert result["status"] == "succeeded", result
    token: str = result["payment_method_token"]
    return token


async def intent_count(client: Client, tenant: Tenant) -> int:
    response = await client.get("/api/v1/payments/intents/count", headers=tenant.auth)
    count: int = (await response.json())["count"]
    return count


async def assert_refused(response: Any, param: str | None, *hidden: str) -> None:
    """A fresh 403, not a replay, and none of the first answer's secrets in it."""
    text = await response.text()
    assert response.status == 403, text
    assert "Idempotent-Replayed" not in response.headers
    error = (await response.json())["error"]
    assert error["type"] == "permission_error", error
    assert error.get("param") == param, error
    for value in hidden:
        assert value not in text


async def test_a_publishable_key_cannot_replay_a_manual_capture_intent(
    client: Client, tenant: Tenant
) -> None:
    """The secret key's answer holds the lookup id of an intent that authorizes, not charges."""
    body = intent_body(tenant, capture_method="manual")
    key = {"Idempotency-Key": "manual-1"}
    first = await client.post(INTENT, json=body, headers={**tenant.auth, **key})
    intent = await first.json()
    assert first.status == 200, intent
    replay = await client.post(INTENT, json=body, headers={**tenant.publishable_auth, **key})
    await assert_refused(replay, "capture_method", intent["payment_intent_lookup_id"])
    # The secret key still gets its own answer, and nothing else was created.
    again = await client.post(INTENT, json=body, headers={**tenant.auth, **key})
    assert again.headers["Idempotent-Replayed"] == "true"
    assert await again.json() == intent
    assert await intent_count(client, tenant) == 1


async def test_a_publishable_key_cannot_replay_a_saved_card_charge(
    client: Client, tenant: Tenant
) -> None:
    body = intent_body(tenant, card_token=await saved_card(client, tenant))
    key = {"Idempotency-Key": "charge-1"}
    first = await client.post(INTENT, json=body, headers={**tenant.auth, **key})
    charged = await first.json()
    assert first.status == 200 and charged["status"] == "PROCESSED", charged
    replay = await client.post(INTENT, json=body, headers={**tenant.publishable_auth, **key})
    await assert_refused(replay, "card_token", charged["payment_intent_lookup_id"])
    assert await intent_count(client, tenant) == 1


async def test_a_publishable_key_cannot_replay_a_secret_key_route(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    body = {"name": "Main", "currency_id": "USD"}
    key = {"Idempotency-Key": "wallet-1"}
    first = await client.post("/api/v1/wallet", json=body, headers={**tenant.auth, **key})
    wallet = await first.json()
    assert first.status == 200, wallet
    replay = await client.post(
        "/api/v1/wallet", json=body, headers={**tenant.publishable_auth, **key}
    )
    await assert_refused(replay, None, wallet["id"])
    assert len((await treasury.wallets.list(tenant.company_id)).items) == 1


async def test_a_publishable_key_does_not_get_the_secret_keys_pmti(
    client: Client, tenant: Tenant
) -> None:
    """Either key may create a PMTI, but one key kind's answer (with its secret URLs) is never
    the other's: the publishable key's request is a fresh one, replayed only to that kind."""
    key = {"Idempotency-Key": "pmti-1"}
    first = await client.post(PMTI, json=pmti_body(tenant), headers={**tenant.auth, **key})
    secret_made = await first.json()
    assert first.status == 200, secret_made
    urls = secret_made["latest_version"]
    fresh = await client.post(
        PMTI, json=pmti_body(tenant), headers={**tenant.publishable_auth, **key}
    )
    made = await fresh.json()
    assert fresh.status == 200, made
    assert "Idempotent-Replayed" not in fresh.headers
    assert made["id"] != secret_made["id"]
    text = await fresh.text()
    assert urls["confirm_endpoint_url"] not in text
    assert urls["provider_tokenization_url"] not in text
    # Each kind replays its own answer.
    for auth, answer in ((tenant.publishable_auth, made), (tenant.auth, secret_made)):
        again = await client.post(PMTI, json=pmti_body(tenant), headers={**auth, **key})
        assert again.headers["Idempotent-Replayed"] == "true"
        assert await again.json() == answer


async def test_a_secret_key_does_not_get_the_publishable_keys_answer(
    client: Client, tenant: Tenant
) -> None:
    body = intent_body(tenant)
    key = {"Idempotency-Key": "checkout-1"}
    first = await client.post(INTENT, json=body, headers={**tenant.publishable_auth, **key})
    theirs = await first.json()
    assert first.status == 200, theirs
    second = await client.post(INTENT, json=body, headers={**tenant.auth, **key})
    ours = await second.json()
    assert second.status == 200, ours
    assert "Idempotent-Replayed" not in second.headers
    assert ours["id"] != theirs["id"]
    assert await intent_count(client, tenant) == 2


async def test_a_stored_answer_is_not_replayed_to_a_key_that_may_no_longer_ask(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    """A record the publishable key itself stored before issue 20 (a saved card it charged) is
    not replayed: the request is authorized before any stored answer is looked at."""
    body = json.dumps(intent_body(tenant, card_token=await saved_card(client, tenant))).encode()
    claim = await treasury.idempotency.claim(
        tenant.company_id,
        "before-20",
        fingerprint("POST", INTENT, body),
        kind=KeyKind.PUBLISHABLE,
    )
    assert isinstance(claim, Claim)
    stored = b'{"payment_intent_lookup_id": "pil_stored_answer"}'
    await treasury.idempotency.complete(claim, StoredResponse(200, stored))
    headers = {
        **tenant.publishable_auth,
        "Idempotency-Key": "before-20",
        "Content-Type": "application/json",
    }
    response = await client.post(INTENT, data=body, headers=headers)
    await assert_refused(response, "card_token", "pil_stored_answer")
