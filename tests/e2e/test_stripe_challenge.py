"""3-D Secure over HTTP with the Stripe card provider, against a real localstripe on loopback.

The customer's side at "Stripe" is localstripe's ``_authenticate`` endpoint (see
tests/integration/test_stripe_three_d_secure.py). localstripe refuses ``return_url`` and only
ever answers ``next_action`` ``use_stripe_sdk``; what real Stripe does with a ``return_url``
(``next_action`` ``redirect_to_url``) is played by :class:`RedirectingStripe`, a loopback proxy
in front of localstripe that takes the ``return_url`` off the create and writes Stripe's
``redirect_to_url`` into the answers.
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.integration.test_stripe_three_d_secure import KEY, authenticate_at_stripe
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.payments.records import Transaction
from treasury_core.testing import check_invariants
from treasury_core.testing.fakes.clock import FakeClock
from treasury_vault.aesgcm import generate_key

Client = TestClient[Any, Any]
INTENT = "/api/v1/payments/intent"
THREE_D_SECURE = "4000000000003220"
PUBLIC_URL = "https://pay.example/shop"
#: Where "Stripe" has the customer authenticate (never fetched: the test is the customer).
STRIPE_PAGE = "https://hooks.stripe.test/3d_secure/"


class RedirectingStripe:
    """localstripe, answering as Stripe does to a PaymentIntent confirmed with a return_url."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        #: The return_url each PaymentIntent was created with.
        self.return_urls: dict[str, str] = {}
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                return_url = None
                if self.command == "POST" and self.path == "/v1/payment_intents" and body:
                    fields = urllib.parse.parse_qsl(body.decode(), keep_blank_values=True)
                    return_url = dict(fields).get("return_url")
                    kept = [(k, v) for k, v in fields if k != "return_url"]
                    body = urllib.parse.urlencode(kept).encode()
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "content-length")
                }
                if body is not None:
                    headers["Content-Length"] = str(len(body))
                upstream = http.client.HTTPConnection(
                    front.upstream.hostname, front.upstream.port, timeout=30
                )
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                status, answer = response.status, response.read()
                upstream.close()
                if status == 200 and self.path.startswith("/v1/payment_intents"):
                    answer = front._as_stripe(answer, return_url)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = _relay
            do_POST = _relay

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _as_stripe(self, answer: bytes, return_url: str | None) -> bytes:
        intent = json.loads(answer)
        if intent.get("object") != "payment_intent":
            return answer
        if return_url is not None:
            self.return_urls[intent["id"]] = return_url
        known = self.return_urls.get(intent["id"])
        action = intent.get("next_action")
        if known is not None and action is not None and action.get("type") == "use_stripe_sdk":
            intent["next_action"] = {
                "type": "redirect_to_url",
                "redirect_to_url": {"url": STRIPE_PAGE + intent["id"], "return_url": known},
            }
        return json.dumps(intent).encode()

    def __enter__(self) -> RedirectingStripe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def redirecting_stripe(localstripe_url: str) -> Iterator[RedirectingStripe]:
    with RedirectingStripe(localstripe_url) as front:
        yield front


def _config(tmp_path: Path, api_base: str, **fields: Any) -> TreasuryConfig:
    return TreasuryConfig(
        database_url=f"sqlite:///{tmp_path / 'api.db'}",
        card_provider="stripe",
        stripe_api_key=KEY,  # type: ignore[arg-type]  # pydantic makes the SecretStr
        stripe_api_base=api_base,
        **fields,
    )


@pytest.fixture
def live_mode() -> None:
    """Asked for by a test whose server runs outside sandbox mode."""


@pytest.fixture
def treasury(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, localstripe_url: str
) -> Iterator[Treasury]:
    """The server's treasury with the stripe provider: straight to localstripe, or (for a test
    asking for ``redirecting_stripe``) behind :class:`RedirectingStripe` with a public URL."""
    if "redirecting_stripe" in request.fixturenames:
        front = request.getfixturevalue("redirecting_stripe")
        config = _config(tmp_path, front.url, public_url=PUBLIC_URL)
    elif "live_mode" in request.fixturenames:
        config = _config(
            tmp_path,
            localstripe_url,
            sandbox=False,
            vault_key=generate_key(),
            form_key="a form key of at least sixteen characters",
        )
    else:
        config = _config(tmp_path, localstripe_url)
    built = bootstrap(config, clock=clock, wall_clock=clock)
    yield built
    check_invariants(built.storage)


async def _challenged(client: Client, tenant: Tenant, capture_method: str) -> tuple[str, str]:
    body = {
        "account_id": tenant.account_id,
        "billing_amount": 2_500,
        "billing_currency": "USD",
        "payment_type": "Card Payment",
        "capture_method": capture_method,
    }
    response = await client.post(INTENT, json=body, headers=tenant.auth)
    intent = await response.json()
    assert response.status == 200, intent
    lookup_id = intent["payment_intent_lookup_id"]
    card = {"card_number": THREE_D_SECURE, "expiry_month": 12, "expiry_year": 2040, "cvc": "123"}
    response = await client.post(f"/pay/{lookup_id}", json=card)
    answer = await response.json()
    assert response.status == 200, answer
    # The interface's answer is the same as with the sandbox.
    assert answer["status"] == "INITIALIZED"
    assert answer["transaction"]["status"] == "requires_action"
    assert answer["next_action"] == {"type": "three_d_secure", "url": f"/pay/{lookup_id}/challenge"}
    assert "action_url" not in answer["transaction"]  # stored, not in the interface record
    return lookup_id, answer["transaction"]["id"]


async def _status(client: Client, tenant: Tenant, lookup_id: str) -> str:
    query = f"{INTENT}?payment_intent_lookup_id={lookup_id}"
    response = await client.get(query, headers=tenant.auth)
    return str((await response.json())["status"])


async def _reference(treasury: Treasury, tenant: Tenant, txn_id: str) -> str:
    """The waiting attempt's PaymentIntent at Stripe (the customer's browser would be there)."""
    txn = await treasury.storage.run(
        lambda uow: uow.records.get(Transaction, txn_id, tenant.company_id), write=False
    )
    assert txn is not None and txn.provider_reference is not None
    return txn.provider_reference


async def test_the_hosted_page_sends_the_customer_to_stripe_and_back(
    client: Client,
    tenant: Tenant,
    treasury: Treasury,
    redirecting_stripe: RedirectingStripe,
    localstripe_url: str,
) -> None:
    lookup_id, txn_id = await _challenged(client, tenant, "manual")
    reference = await _reference(treasury, tenant, txn_id)
    # Stripe was told where to send the customer back: the server's public address.
    return_url = f"{PUBLIC_URL}/pay/{lookup_id}/challenge/return"
    assert redirecting_stripe.return_urls[reference] == return_url

    page = await client.get(f"/pay/{lookup_id}/challenge")
    html = await page.text()
    assert page.status == 200
    # A link to Stripe's page instead of the sandbox's pass/fail buttons.
    assert f'href="{STRIPE_PAGE}{reference}"' in html
    assert 'name="outcome"' not in html

    # Back from Stripe before authenticating there: still waiting, the link shown again.
    back = f"/pay/{lookup_id}/challenge/return?payment_intent={reference}"
    early = await client.get(back, allow_redirects=False)
    assert early.status == 400
    assert "has not confirmed" in await early.text()
    assert await _status(client, tenant, lookup_id) == "INITIALIZED"

    authenticate_at_stripe(localstripe_url, reference, success=True)
    returned = await client.get(back, allow_redirects=False)
    assert returned.status == 303
    assert returned.headers["Location"] == f"/pay/{lookup_id}"
    assert await _status(client, tenant, lookup_id) == "AUTHORIZED"
    done = await client.get(f"/pay/{lookup_id}")
    assert "Payment authorized" in await done.text()
    # Coming back twice (a reload) changes nothing.
    again = await client.get(back, allow_redirects=False)
    assert again.status == 303
    assert await _status(client, tenant, lookup_id) == "AUTHORIZED"


async def test_a_failed_authentication_shows_the_payment_form_again(
    client: Client, tenant: Tenant, treasury: Treasury, localstripe_url: str
) -> None:
    lookup_id, txn_id = await _challenged(client, tenant, "automatic")
    reference = await _reference(treasury, tenant, txn_id)
    authenticate_at_stripe(localstripe_url, reference, success=False)
    returned = await client.get(f"/pay/{lookup_id}/challenge/return", allow_redirects=False)
    assert returned.status == 402
    html = await returned.text()
    assert "did not confirm" in html
    assert 'name="card_number"' in html  # the customer may try another card
    assert await _status(client, tenant, lookup_id) == "INITIALIZED"


async def test_the_api_completes_with_stripes_verdict(
    client: Client, tenant: Tenant, treasury: Treasury, localstripe_url: str
) -> None:
    lookup_id, txn_id = await _challenged(client, tenant, "automatic")
    # No public URL: Stripe was given no return_url, so there is no page of Stripe's to link.
    page = await (await client.get(f"/pay/{lookup_id}/challenge")).text()
    assert "hooks.stripe" not in page
    early = await client.post(f"/pay/{lookup_id}/challenge", json={"outcome": "pass"})
    body = await early.json()
    assert early.status == 400, body
    assert body["error"]["code"] == "authentication_incomplete"
    reference = await _reference(treasury, tenant, txn_id)
    authenticate_at_stripe(localstripe_url, reference, success=True)
    passed = await client.post(f"/pay/{lookup_id}/challenge", json={"outcome": "pass"})
    answer = await passed.json()
    assert passed.status == 200, answer
    assert answer["status"] == "PROCESSED"
    assert answer["transaction"]["status"] == "completed"


async def test_outside_sandbox_mode_the_page_does_not_call_itself_a_test(
    client: Client, tenant: Tenant, live_mode: None
) -> None:
    lookup_id, _ = await _challenged(client, tenant, "automatic")
    page = await client.get(f"/pay/{lookup_id}/challenge")
    html = await page.text()
    assert page.status == 200
    assert "test page" not in html
    assert "Confirm the payment as your bank asks" in html
