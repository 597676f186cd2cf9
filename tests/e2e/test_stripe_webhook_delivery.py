"""A real localstripe delivers signed webhooks to a real ``treasury serve`` on loopback.

The server runs as ``treasury serve`` does (a subprocess, configured by ``TREASURY_*``
variables: the stripe card provider against this module's own localstripe, with a webhook
secret). localstripe keeps one webhook registry per process, so this module starts its own
rather than registering on the session's. Two endpoints are registered for the same URL: one
with the server's secret, one with another; localstripe signs and posts every
``payment_intent.succeeded`` to both. What is checked: the well-signed deliveries are answered
2xx (localstripe logs each answer), those under the wrong secret 400; a payment made through
the API is found from Stripe's reference and left as it was, a hold captured at Stripe
directly moves its intent to ``PROCESSED``, and a charge made at Stripe outside treasury-core
is acknowledged and ignored.

localstripe announces a charge once captured (``payment_intent.succeeded``), not a hold, and
sends neither disputes nor cancellations nor refunds: those are tested with payloads signed in
the tests (tests/integration/test_stripe_webhooks.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import stripe

from tests import stripe_hooks as hooks
from tests.conftest import running_localstripe
from tests.listening import free_port, wait_listening
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.payments.records import ProviderEventReceipt

KEY = "sk_test_treasury"
CARD = {"card_number": "4242424242424242", "expiry_month": 12, "expiry_year": 2040, "cvc": "123"}
#: localstripe's deliveries wait a second each; this bounds the whole wait, not a sleep.
DELIVERY_DEADLINE_SECONDS = 60
EVENT = "payment_intent.succeeded"
DELIVERED = f'webhook "{EVENT}" successfully delivered'
REFUSED = f'webhook "{EVENT}" failed with response code 400'


@pytest.fixture(scope="module")
def localstripe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """This module's own localstripe: its URL and its log."""
    home = tmp_path_factory.mktemp("localstripe_hooks")
    with running_localstripe(home) as url:
        yield url, home / "server.log"


async def _logged(log: Path, delivered: int, refused: int) -> str:
    """localstripe's log once it shows ``delivered`` and ``refused`` answers (polled)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DELIVERY_DEADLINE_SECONDS
    while True:
        text = await asyncio.to_thread(log.read_text, errors="replace")
        if text.count(DELIVERED) >= delivered and text.count(REFUSED) >= refused:
            return text
        if loop.time() > deadline:
            raise AssertionError(f"deliveries not answered in time; localstripe said:\n{text}")
        await asyncio.sleep(0.2)


async def test_localstripe_webhooks_reach_treasury_serve(
    tmp_path: Path, localstripe: tuple[str, Path]
) -> None:
    stripe_url, log = localstripe
    db = tmp_path / "hooks.db"
    setup = bootstrap(TreasuryConfig(database_url=f"sqlite:///{db}"))
    created = await setup.companies.create_company("Acme")
    setup.close()

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREASURY_")}
    env.update(
        TREASURY_CARD_PROVIDER="stripe",
        TREASURY_STRIPE_API_KEY=KEY,
        TREASURY_STRIPE_API_BASE=stripe_url,
        TREASURY_STRIPE_WEBHOOK_SECRET=hooks.SECRET,
        TREASURY_JOB_POLL_SECONDS="3600",
    )
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "treasury_aiohttp.cli", "serve", "--port", str(port),
        "--database", str(db), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        await wait_listening(port, server)
        hook_url = f"http://127.0.0.1:{port}/hooks/stripe"
        async with aiohttp.ClientSession() as plain:
            for name, secret in (("ours", hooks.SECRET), ("forged", "whsec_not_the_secret")):
                registered = await plain.post(
                    f"{stripe_url}/_config/webhooks/{name}",
                    json={
                        "url": hook_url,
                        "secret": secret,
                        "events": ["payment_intent.succeeded"],
                    },
                )
                assert registered.status == 200
        auth = {"Authorization": f"Bearer {created.secret_key}"}
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", headers=auth) as http:
            paid = {}
            for capture in ("automatic", "manual"):
                answer = await http.post(
                    "/api/v1/payments/intent",
                    json={
                        "account_id": created.merchant_account.id,
                        "billing_amount": 1_500,
                        "billing_currency": "USD",
                        "payment_type": "Card Payment",
                        "capture_method": capture,
                    },
                )
                assert answer.status == 200, await answer.text()
                lookup = (await answer.json())["payment_intent_lookup_id"]
                payment = await http.post(f"/pay/{lookup}", json=CARD)
                assert payment.status == 200, await payment.text()
                paid[capture] = lookup
            # A charge made at Stripe without treasury-core: its event names no intent of ours.
            outside = stripe.StripeClient(KEY, base_addresses={"api": stripe_url})
            method = outside.v1.payment_methods.create(
                params={
                    "type": "card",
                    "card": {
                        "number": "4242424242424242",
                        "exp_month": 12,
                        "exp_year": 2040,
                        "cvc": "123",
                    },
                }
            )
            outside.v1.payment_intents.create(
                params={
                    "amount": 700,
                    "currency": "usd",
                    "payment_method": method.id,
                    "payment_method_types": ["card"],
                    "capture_method": "automatic",
                    "confirm": True,
                }
            )
            # The hold is captured at Stripe directly (its dashboard, say): Stripe announces the
            # capture, and the intent here follows.
            [hold] = [
                pi
                for pi in outside.v1.payment_intents.list().data
                if pi.status == "requires_capture"
            ]
            outside.v1.payment_intents.capture(hold.id)
            # Three events (the automatic payment, the capture, the outside charge), each
            # posted once with each secret.
            await _logged(log, delivered=3, refused=3)
            for lookup in paid.values():
                intent = await http.get(
                    "/api/v1/payments/intent", params={"payment_intent_lookup_id": lookup}
                )
                assert (await intent.json())["status"] == "PROCESSED"
        server.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(server.communicate(), 60)
        assert server.returncode == 0, output
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()

    after = bootstrap(TreasuryConfig(database_url=f"sqlite:///{db}"))
    try:
        receipts = await after.storage.run(
            lambda uow: uow.records.list(ProviderEventReceipt, created.company.id, 10, None),
            write=False,
        )
    finally:
        after.close()
    # One receipt per charge of ours (the outside charge leaves none), each found from Stripe's
    # reference.
    assert sorted((r.type, r.kind, r.result) for r in receipts) == [
        ("payment_intent.succeeded", "captured", "applied"),  # the hold captured at Stripe
        ("payment_intent.succeeded", "captured", "nothing_to_do"),  # recorded when paid
    ]
