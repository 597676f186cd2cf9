"""Bearer keys (decisions.md "Authentication and tenancy") and Idempotency-Key replays."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from treasury_core import Treasury
from treasury_core.idempotency import fingerprint

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
        tenant.company_id, "busy", fingerprint("POST", "/api/v1/wallet", body)
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
        tenant.company_id, "crashed", fingerprint("POST", "/api/v1/wallet", body)
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


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there"])
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
