"""Card numbers and CVCs never reach logs, error bodies, events or the database in plain text.

Known card numbers go through every path that takes a card (the confirm call, the hosted
tokenization form, the payment page as JSON and as a form, 3-D Secure, declines, malformed
numbers, saved cards charged as ``card_token``) with every logger at DEBUG; then the log output,
every response body, the outbox and the raw bytes of the SQLite database and its WAL are
searched for them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.e2e.conftest import Tenant
from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.testing.fakes.clock import FakeClock

Client = TestClient[Any, Any]
HTML = {"Accept": "text/html"}
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
CVC = "937"
AMEX_CVC = "9371"

#: Every number sent below; each must appear nowhere afterwards.
NUMBERS = (
    "4242424242424242",  # approved
    "5555555555554444",  # approved, through the hosted form
    "378282246310005",  # approved (amex), paid as JSON
    "4000000000000002",  # declined
    "4000000000003220",  # 3-D Secure
    "4242424242424241",  # fails the Luhn check
)


#: The sandbox's card forms list its published test cards (the same numbers for every visitor);
#: what a customer typed must appear nowhere else in a page.
_TEST_CARDS = re.compile(r'<section class="test-cards".*?</section>', re.DOTALL)


def _without_published_test_cards(body: str) -> str:
    return _TEST_CARDS.sub("", body)


def spellings(number: str) -> list[str]:
    groups = [number[i : i + 4] for i in range(0, len(number), 4)]
    return [number, " ".join(groups), "-".join(groups), number.encode().hex()]


@pytest.fixture
async def sqlite_client(
    tmp_path: Path, clock: FakeClock
) -> AsyncIterator[tuple[Client, Treasury, Path]]:
    db = tmp_path / "leak.db"
    treasury = bootstrap(
        TreasuryConfig(database_url=f"sqlite:///{db}", pool_size=2), clock=clock, wall_clock=clock
    )
    client = TestClient(TestServer(create_app(treasury, close_treasury=True)))
    await client.start_server()
    try:
        yield client, treasury, db
    finally:
        await client.close()


async def test_card_data_never_leaks(
    sqlite_client: tuple[Client, Treasury, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client, treasury, db = sqlite_client
    caplog.set_level(logging.DEBUG)
    created = await treasury.companies.create_company("Acme")
    tenant = Tenant(
        created.company.id,
        created.merchant_account.id,
        created.secret_key,
        created.publishable_key,
    )
    bodies: list[str] = []

    async def call(method: str, path: str, **kwargs: Any) -> Any:
        response = await client.request(method, path, allow_redirects=False, **kwargs)
        text = await response.text()
        bodies.append(text)
        return response.status, text

    def card(number: str, **extra: Any) -> dict[str, Any]:
        cvc = AMEX_CVC if number.startswith("3") else CVC
        return {
            "cardholder_name": "Ada Lovelace",
            "card_number": number,
            "expiry_month": 12,
            "expiry_year": 2030,
            "cvc": cvc,
            **extra,
        }

    async def pmti() -> dict[str, Any]:
        status, text = await call(
            "POST",
            "/api/v1/payment_method_token_intent",
            json={
                "account_id": tenant.account_id,
                "payment_type": "Tokenization",
                "customer_email": "ada@example.com",
                "customer_phone_number": "+447700900123",
            },
            headers=tenant.auth,
        )
        assert status == 200, text
        body: dict[str, Any] = json.loads(text)
        return body

    async def intent(**extra: Any) -> str:
        status, text = await call(
            "POST",
            "/api/v1/payments/intent",
            json={
                "account_id": tenant.account_id,
                "billing_amount": 1000,
                "billing_currency": "USD",
                "payment_type": "Card Payment",
                **extra,
            },
            headers=tenant.auth,
        )
        assert status == 200, text
        lookup: str = json.loads(text)["payment_intent_lookup_id"]
        return lookup

    # Server to server: approved, declined, and malformed numbers.
    approved = await pmti()
    confirm = urlsplit(approved["latest_version"]["confirm_endpoint_url"]).path
    status, text = await call("POST", confirm, json=card("4242424242424241"))
    assert status == 400
    status, text = await call("POST", confirm, json=card("4242-4242-4242-424x"))
    assert status == 400
    status, text = await call("POST", confirm, json=card("4242 4242 4242 4242"))
    assert status == 200, text
    token = json.loads(text)["payment_method_token"]
    declined = await pmti()
    await call(
        "POST",
        urlsplit(declined["latest_version"]["confirm_endpoint_url"]).path,
        json=card("4000000000000002"),
    )

    # The hosted tokenization form.
    hosted = await pmti()
    form_path = urlsplit(hosted["latest_version"]["provider_tokenization_url"]).path
    _, page = await call("GET", form_path, headers=HTML)
    csrf = CSRF.search(page)
    assert csrf is not None
    status, _ = await call(
        "POST",
        form_path,
        data={**card("5555555555554444"), "csrf_token": csrf.group(1)},
        headers=HTML,
    )
    assert status == 303

    # The payment page as JSON (approved, declined, 3-D Secure) and as a form.
    lookup = await intent()
    await call("POST", f"/pay/{lookup}", json=card("4000000000000002"))
    await call("POST", f"/pay/{lookup}", json=card("378282246310005"))
    lookup = await intent()
    _, page = await call("GET", f"/pay/{lookup}", headers=HTML)
    csrf = CSRF.search(page)
    assert csrf is not None
    await call(
        "POST",
        f"/pay/{lookup}",
        data={**card("4000000000003220"), "csrf_token": csrf.group(1)},
        headers=HTML,
    )
    _, page = await call("GET", f"/pay/{lookup}/challenge", headers=HTML)
    csrf = CSRF.search(page)
    assert csrf is not None
    await call(
        "POST",
        f"/pay/{lookup}/challenge",
        data={"outcome": "pass", "csrf_token": csrf.group(1)},
        headers=HTML,
    )

    # The saved card, charged.
    status, text = await call(
        "POST",
        "/api/v1/payments/intent",
        json={
            "account_id": tenant.account_id,
            "billing_amount": 700,
            "billing_currency": "USD",
            "payment_type": "Card Payment",
            "card_token": token,
        },
        headers=tenant.auth,
    )
    assert json.loads(text)["status"] == "PROCESSED"

    events = await treasury.storage.run(lambda uow: uow.outbox.list(tenant.company_id))
    event_text = json.dumps([e.model_dump(mode="json") for e in events])
    treasury.storage.checkpoint()  # type: ignore[attr-defined]
    raw = b"".join(
        path.read_bytes() for path in db.parent.iterdir() if path.name.startswith(db.name)
    )
    logs = caplog.text
    assert "/confirm/" in logs  # the access log did record the calls
    for number in NUMBERS:
        for spelled in spellings(number):
            assert spelled not in logs, f"{number} in the logs"
            assert spelled.encode() not in raw, f"{number} in the database file"
            assert spelled not in event_text, f"{number} in an event"
            for body in map(_without_published_test_cards, bodies):
                assert spelled not in body, f"{number} in a response"
    for cvc in (CVC, AMEX_CVC):
        for leak in (f'"cvc":"{cvc}"', f'"cvc": "{cvc}"', f"'cvc': '{cvc}'", f"cvc={cvc}"):
            assert leak not in logs
            assert leak.encode() not in raw
    assert b'"cvc"' not in raw
    # The saved cards are in the database, sealed.
    assert b"v1." in raw
