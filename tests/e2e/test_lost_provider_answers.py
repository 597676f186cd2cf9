"""A card provider call whose answer was lost, retried by the client with the same
``Idempotency-Key``: the retry resumes what the first request started (the same intent, refund
or capture, under the same provider key), so the provider makes nothing twice.

The provider is the sandbox's, wrapped to keep keys as Stripe does (a repeated key answers the
first outcome) and to lose the answer of a chosen call after acting, as a connection dropped
after the provider's work does. Over HTTP, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.e2e.conftest import Tenant
from tests.e2e.test_auth_and_idempotency import INTENT, intent_body, intent_count, saved_card
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.errors import ProviderDidNotAct, ProviderError
from treasury_core.ports.card_provider import CallOwner, CardData, CardProviderResult
from treasury_core.testing.clock import FakeClock
from treasury_sandbox.card_provider import SandboxCardProvider

Client = TestClient[Any, Any]
CAPTURE = "/api/v1/payments/intent/capture"
REFUND = "/api/v1/payments/intent/refund"


class LosesAnswers(SandboxCardProvider):
    """The sandbox, keeping keys as Stripe does, losing or refusing chosen calls."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.lose: set[str] = set()  # the next call of these acts, then its answer is lost
        self.refuse: set[str] = set()  # the next call of these does nothing (a 429, say)
        self.made: Counter[str] = Counter()  # what the provider did, by operation
        self.owners: list[CallOwner] = []
        self._answers: dict[str, CardProviderResult] = {}

    def keyed_calls_supported(self) -> bool:
        return True

    def attempt_keys_supported(self) -> bool:
        return True

    async def _keyed(
        self, operation: str, key: str | None, act: Callable[[], Awaitable[CardProviderResult]]
    ) -> CardProviderResult:
        assert key is not None, f"{operation} was called without a key"
        if operation in self.refuse:
            self.refuse.discard(operation)
            raise ProviderDidNotAct("The card provider is limiting requests; try again shortly")
        answer = self._answers.get(f"{operation}:{key}")
        if answer is None:
            answer = self._answers[f"{operation}:{key}"] = await act()
            self.made[operation] += 1
        if operation in self.lose:
            self.lose.discard(operation)
            raise ProviderError("The card provider did not answer in time")
        return answer

    async def authorize(  # type: ignore[override]  # the keyed call's keywords
        self,
        card: CardData,
        amount: int,
        currency: str,
        *,
        capture: bool,
        attempt_key: str | None = None,
        owner: CallOwner | None = None,
    ) -> CardProviderResult:
        assert owner is not None
        self.owners.append(owner)
        return await self._keyed(
            "authorize",
            attempt_key,
            lambda: SandboxCardProvider.authorize(self, card, amount, currency, capture=capture),
        )

    async def capture(  # type: ignore[override]
        self, reference: str, amount: int, *, key: str | None = None
    ) -> CardProviderResult:
        return await self._keyed(
            "capture", key, lambda: SandboxCardProvider.capture(self, reference, amount)
        )

    async def refund(  # type: ignore[override]
        self, reference: str, amount: int, *, key: str | None = None, owner: CallOwner | None = None
    ) -> CardProviderResult:
        assert owner is not None and owner.refund_id is not None
        return await self._keyed(
            "refund", key, lambda: SandboxCardProvider.refund(self, reference, amount)
        )


@pytest.fixture
def provider(clock: FakeClock) -> LosesAnswers:
    return LosesAnswers(clock)


@pytest.fixture
def treasury(database_url: str, clock: FakeClock, provider: LosesAnswers) -> Treasury:
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
    client: Client, tenant: Tenant, provider: LosesAnswers
) -> None:
    body = intent_body(tenant, card_token=await saved_card(client, tenant))
    provider.lose.add("authorize")
    status, lost = await _post(client, tenant, INTENT, body, "charge-1")
    assert status == 502, lost
    left = lost["error"]["resource"]
    assert left["object"] == "payment_intent"
    assert left["status"] == "INITIALIZED"
    status, charged = await _post(client, tenant, INTENT, body, "charge-1")
    assert status == 200, charged
    assert (charged["id"], charged["status"]) == (left["id"], "PROCESSED")
    assert provider.made["authorize"] == 1
    assert provider.owners[0].payment_intent_id == left["id"]
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
    client: Client, tenant: Tenant, provider: LosesAnswers
) -> None:
    intent = await _charged(client, tenant)
    body = {"payment_intent_id": intent["id"], "amount": 161}
    provider.lose.add("refund")
    status, lost = await _post(client, tenant, REFUND, body, "refund-1")
    assert status == 502, lost
    left = lost["error"]["resource"]
    assert (left["object"], left["status"]) == ("refund", "pending")
    status, refund = await _post(client, tenant, REFUND, body, "refund-1")
    assert status == 200, refund
    assert (refund["id"], refund["status"]) == (left["id"], "succeeded")
    assert provider.made["refund"] == 1
    listed = await client.get(f"/api/v1/payments/intent/{intent['id']}", headers=tenant.auth)
    assert (await listed.json())["amount_refunded"] == 161


async def test_a_refund_the_provider_did_not_act_on_fails_at_once(
    client: Client, tenant: Tenant, provider: LosesAnswers
) -> None:
    intent = await _charged(client, tenant)
    body = {"payment_intent_id": intent["id"], "amount": 300}
    provider.refuse.add("refund")
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
    assert provider.made["refund"] == 1


async def test_a_capture_whose_answer_was_lost_answers_the_captured_intent(
    client: Client, tenant: Tenant, provider: LosesAnswers
) -> None:
    intent = await _charged(client, tenant, capture_method="manual")
    assert intent["status"] == "AUTHORIZED"
    body = {"payment_intent_id": intent["id"]}
    provider.lose.add("capture")
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
    assert provider.made["capture"] == 1
