"""Issue 24 over HTTP: minimum amounts, closing a payment link, and intents' metadata."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from tests.e2e.conftest import Tenant
from tests.e2e.test_payments_api import (
    ADVANCE,
    APPROVED,
    CAPTURE,
    INTENT,
    THREE_D_SECURE,
    Client,
    Outbox,
    create,
    events_of,
    get,
    pay,
    post,
)
from treasury_core import Treasury
from treasury_core.testing.fakes.clock import FakeClock

EXPIRE = "/api/v1/payments/intent/expire"
LIST = "/api/v1/payments/intents"
EXPIRED = "merchant_of_record.payment_intent.expired"


def metadata_path(intent: Any) -> str:
    return f"{INTENT}/{intent['id']}/metadata"


async def test_amounts_below_the_currency_minimum_are_refused(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    for currency, minimum in (("USD", 50), ("GBP", 30), ("JPY", 50), ("KWD", 150)):
        error = (
            await create(client, tenant, 400, billing_currency=currency, billing_amount=minimum - 1)
        )["error"]
        assert error["code"] == "amount_too_small"
        assert error["param"] == "billing_amount"
        assert f"at least {minimum}" in error["message"]
        assert currency in error["message"]
        made = await create(client, tenant, billing_currency=currency, billing_amount=minimum)
        assert made["billing_amount"] == minimum
    # The refused ones left nothing behind: four intents, four created events.
    listed = await get(client, tenant, LIST)
    assert len(listed) == 4


async def test_expires_at_closes_the_link_on_the_business_clock(
    client: Client, tenant: Tenant, treasury: Treasury, clock: FakeClock
) -> None:
    now = clock.now()
    past = await create(client, tenant, 400, expires_at=now.isoformat())
    assert past["error"]["code"] == "expires_at_in_past"
    assert past["error"]["param"] == "expires_at"
    naive = await create(client, tenant, 400, expires_at="2030-01-01T00:00:00")
    assert naive["error"]["param"] == "expires_at"

    closes = now + timedelta(hours=1)
    intent = await create(client, tenant, expires_at=closes.isoformat())
    assert datetime.fromisoformat(intent["expires_at"]) == closes
    assert intent["status"] == "INITIALIZED"
    lookup_id = intent["payment_intent_lookup_id"]
    page = await client.get(f"/pay/{lookup_id}", headers={"Accept": "text/html"})
    assert page.status == 200

    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    await post(client, tenant, ADVANCE, {"seconds": 3600})
    # The job at expires_at announced it; the intent did not change state.
    assert outbox.new() == [EXPIRED]
    refused = await pay(client, lookup_id, status=400)
    assert refused["error"]["code"] == "payment_intent_expired"
    page = await client.get(f"/pay/{lookup_id}", headers={"Accept": "text/html"})
    assert page.status == 410
    assert "expired" in await page.text()
    # The hosted form posted after the link closed gets the same page, and charges nothing.
    posted = await client.post(
        f"/pay/{lookup_id}",
        data={"card_number": APPROVED, "expiry_month": "12", "expiry_year": "2030", "cvc": "123"},
        headers={"Accept": "text/html"},
    )
    assert posted.status == 410
    again = await get(client, tenant, f"{INTENT}?payment_intent_lookup_id={lookup_id}")
    assert again["status"] == "INITIALIZED"
    assert again["amount_refunded"] == 0


async def test_expire_closes_an_unpaid_link_now(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury, clock: FakeClock
) -> None:
    intent = await create(client, tenant, expires_at=(clock.now() + timedelta(days=3)).isoformat())
    lookup_id = intent["payment_intent_lookup_id"]
    # Another company's key finds no such intent.
    missing = await post(
        client, other_tenant, EXPIRE, {"payment_intent_id": intent["id"]}, status=404
    )
    assert missing["error"]["param"] == "payment_intent_id"

    outbox = Outbox(treasury, tenant.company_id)
    outbox.new()
    closed = await post(client, tenant, EXPIRE, {"payment_intent_id": intent["id"]})
    assert closed["status"] == "INITIALIZED"
    assert datetime.fromisoformat(closed["expires_at"]) == clock.now()
    assert outbox.new() == [EXPIRED]
    event = events_of(treasury, tenant.company_id)[-1]
    assert event.data["object"]["id"] == str(intent["id"])
    assert event.data["object"]["expires_at"] == closed["expires_at"]
    # Closing it again changes nothing and fires nothing; nor does its old deadline passing.
    assert await post(client, tenant, EXPIRE, {"payment_intent_id": intent["id"]}) == closed
    await post(client, tenant, ADVANCE, {"seconds": 4 * 24 * 3600})
    assert outbox.new() == []
    assert (await pay(client, lookup_id, status=400))["error"]["code"] == "payment_intent_expired"

    # A 3-D Secure attempt started before the link closed cannot be finished after it.
    pending = await create(client, tenant)
    started = await pay(client, pending["payment_intent_lookup_id"], THREE_D_SECURE)
    assert started["next_action"]["type"] == "three_d_secure"
    await post(client, tenant, EXPIRE, {"payment_intent_id": pending["id"]})
    answer = await client.post(
        f"/pay/{pending['payment_intent_lookup_id']}/challenge", json={"outcome": "pass"}
    )
    assert answer.status == 400
    assert (await answer.json())["error"]["code"] == "payment_intent_expired"

    # A paid intent has no link to close; the publishable key may not close one.
    paid = await create(client, tenant)
    await pay(client, paid["payment_intent_lookup_id"], APPROVED)
    refused = await post(client, tenant, EXPIRE, {"payment_intent_id": paid["id"]}, status=400)
    assert refused["error"]["code"] == "payment_intent_unexpected_state"
    forbidden = await client.post(
        EXPIRE, json={"payment_intent_id": paid["id"]}, headers=tenant.publishable_auth
    )
    assert forbidden.status == 403


async def test_a_manual_intent_link_closes_without_touching_a_hold(
    client: Client, tenant: Tenant
) -> None:
    intent = await create(client, tenant, capture_method="manual")
    await pay(client, intent["payment_intent_lookup_id"], APPROVED)
    # Authorized: capture or cancel apply, not expire.
    refused = await post(client, tenant, EXPIRE, {"payment_intent_id": intent["id"]}, status=400)
    assert refused["error"]["code"] == "payment_intent_unexpected_state"
    captured = await post(client, tenant, CAPTURE, {"payment_intent_id": intent["id"]})
    assert captured["status"] == "PROCESSED"


async def test_metadata_is_set_merged_filtered_and_sent(
    client: Client, tenant: Tenant, other_tenant: Tenant, treasury: Treasury
) -> None:
    first = await create(client, tenant, metadata={"order_id": "A-1", "channel": "web", "x": ""})
    assert first["metadata"] == {"order_id": "A-1", "channel": "web"}
    second = await create(client, tenant, metadata={"order_id": "A-2", "channel": "web"})
    plain = await create(client, tenant)
    assert plain["metadata"] == {}
    # Returned on every read and in the created event's object.
    read = await get(
        client, tenant, f"{INTENT}?payment_intent_lookup_id={first['payment_intent_lookup_id']}"
    )
    assert read["metadata"] == first["metadata"]
    created = [
        e
        for e in events_of(treasury, tenant.company_id)
        if e.data["object"]["id"] == str(first["id"])
    ]
    assert created[0].data["object"]["metadata"] == first["metadata"]

    merged = await post(
        client, tenant, metadata_path(first), {"metadata": {"channel": "", "note": "gift"}}
    )
    assert merged["metadata"] == {"order_id": "A-1", "note": "gift"}
    assert merged["status"] == first["status"]

    async def ids(query: dict[str, str]) -> list[int]:
        listed = await get(client, tenant, f"{LIST}?{urlencode(query)}")
        return [i["id"] for i in listed]

    assert await ids({"metadata[channel]": "web"}) == [second["id"]]
    assert await ids({"metadata[order_id]": "A-1", "metadata[note]": "gift"}) == [first["id"]]
    assert await ids({"metadata[order_id]": "A-1", "metadata[note]": "other"}) == []
    assert await ids({"metadata[order_id]": "A-9"}) == []
    count = await get(client, tenant, f"{LIST}/count?{urlencode({'metadata[channel]': 'web'})}")
    assert count == {"count": 1}
    # The filter sees only the caller's company.
    other = await get(client, other_tenant, f"{LIST}?{urlencode({'metadata[channel]': 'web'})}")
    assert other == []
    # Metadata travels in a later event too: pay the first one.
    await pay(client, first["payment_intent_lookup_id"], APPROVED)
    succeeded = events_of(treasury, tenant.company_id)[-1]
    assert succeeded.data["object"]["metadata"] == {"order_id": "A-1", "note": "gift"}
    # Another company cannot change it.
    missing = await post(
        client, other_tenant, metadata_path(first), {"metadata": {"a": "b"}}, status=404
    )
    assert missing["error"]["code"] == "resource_missing"


async def test_bad_metadata_is_refused_naming_the_key(client: Client, tenant: Tenant) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"k" * 41: "v"}, "metadata[…]"),
        ({"order": "v" * 501}, "metadata[order]"),
        ({"a[b": "v"}, "metadata[…]"),
        ({"": "v"}, "metadata"),
        ({f"k{n}": "v" for n in range(51)}, "metadata"),
    ]
    for metadata, param in cases:
        error = (await create(client, tenant, 400, metadata=metadata))["error"]
        assert error["param"] == param, error
        assert error["type"] == "invalid_request_error"
    wrong_type = (await create(client, tenant, 400, metadata={"count": 3}))["error"]
    assert wrong_type["param"] == "metadata.count"
    assert (await get(client, tenant, LIST)) == []

    intent = await create(client, tenant, metadata={f"k{n}": "v" for n in range(50)})
    too_many = await post(
        client, tenant, metadata_path(intent), {"metadata": {"one_more": "v"}}, status=400
    )
    assert too_many["error"]["param"] == "metadata"
    # Replacing one key while deleting another keeps it at 50.
    swapped = await post(
        client, tenant, metadata_path(intent), {"metadata": {"k0": "", "new": "v"}}
    )
    assert len(swapped["metadata"]) == 50 and "new" in swapped["metadata"]
    for path in (f"{INTENT}/abc/metadata", f"{INTENT}/0/metadata", f"{INTENT}/99999999/metadata"):
        missing = await post(client, tenant, path, {"metadata": {"a": "b"}}, status=404)
        assert missing["error"]["param"] == "payment_intent_id"
    bad_filter = await get(client, tenant, f"{LIST}?{urlencode({'metadata[a]b]': 'x'})}", 400)
    assert bad_filter["error"]["param"] == "metadata[…]"


async def test_metadata_is_part_of_the_idempotency_fingerprint(
    client: Client, tenant: Tenant
) -> None:
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 1_000,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "metadata": {"order_id": "A-1"},
    }
    headers = {**tenant.auth, "Idempotency-Key": "meta-1"}
    first = await client.post(INTENT, json=body, headers=headers)
    assert first.status == 200
    replay = await client.post(INTENT, json=body, headers=headers)
    assert await replay.json() == await first.json()
    changed = await client.post(
        INTENT, json={**body, "metadata": {"order_id": "A-2"}}, headers=headers
    )
    assert changed.status == 400
    assert (await changed.json())["error"]["type"] == "idempotency_error"
    assert len(await get(client, tenant, LIST)) == 1
