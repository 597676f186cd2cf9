"""Vault keys on a real SQLite file: a card saved under one key, charged after the key changed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from pydantic import SecretStr

from treasury_aiohttp import create_app
from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.cards.tokens import CreateTokenIntentRequest
from treasury_core.payments.intents import PaymentType
from treasury_core.payments.requests import CardSubmission
from treasury_core.testing.fakes.clock import FakeClock
from treasury_vault.aesgcm import generate_key


def open_treasury(db: Path, clock: FakeClock, key: str, *old: str) -> Treasury:
    return bootstrap(
        TreasuryConfig(
            database_url=f"sqlite:///{db}",
            vault_key=SecretStr(key),
            vault_old_keys=tuple(SecretStr(k) for k in old),
        ),
        clock=clock,
        wall_clock=clock,
    )


async def save_card(treasury: Treasury) -> tuple[str, int, str]:
    created = await treasury.companies.create_company("Acme")
    company, account = created.company.id, created.merchant_account.id
    pmti = await treasury.cards.create_intent(
        company,
        CreateTokenIntentRequest(
            account_id=account,
            payment_type=PaymentType.TOKENIZATION,
            customer_email="ada@example.com",
            customer_phone_number="+447700900123",
        ),
    )
    secret = pmti.confirm_path.rsplit("/", 1)[1]
    done = await treasury.cards.submit(
        pmti.intent.id,
        secret,
        CardSubmission(
            card_number="4242424242424242", expiry_month=12, expiry_year=2030, cvc="123"
        ),
    )
    assert done.payment_method_token is not None
    return done.payment_method_token, account, created.secret_key


async def charge(treasury: Treasury, token: str, account: int, key: str) -> Any:
    client = TestClient(TestServer(create_app(treasury, close_treasury=True)))
    await client.start_server()
    try:
        response = await client.post(
            "/api/v1/payments/intent",
            json={
                "account_id": account,
                "billing_amount": 500,
                "billing_currency": "USD",
                "payment_type": "Card Payment",
                "card_token": token,
            },
            headers={"Authorization": f"Bearer {key}"},
        )
        count = await client.get(
            "/api/v1/payments/intents/count", headers={"Authorization": f"Bearer {key}"}
        )
        return response.status, await response.json(), (await count.json())["count"]
    finally:
        await client.close()


async def test_a_rotated_key_still_opens_older_cards(tmp_path: Path, clock: FakeClock) -> None:
    first, second = generate_key(), generate_key()
    treasury = open_treasury(tmp_path / "t.db", clock, first)
    token, account, key = await save_card(treasury)
    treasury.close()
    status, body, _ = await charge(
        open_treasury(tmp_path / "t.db", clock, second, first), token, account, key
    )
    assert (status, body["status"]) == (200, "PROCESSED")


async def test_a_card_the_vault_cannot_open_is_an_internal_error_and_changes_nothing(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    treasury = open_treasury(tmp_path / "t.db", clock, generate_key())
    token, account, key = await save_card(treasury)
    treasury.close()
    with caplog.at_level(logging.ERROR, logger="treasury.http"):
        status, body, count = await charge(
            open_treasury(tmp_path / "t.db", clock, generate_key()), token, account, key
        )
    assert status == 500
    assert body == {
        "error": {
            "type": "api_error",
            "code": "internal_error",
            "message": "An internal error occurred",
        }
    }
    assert count == 0  # refused before the intent was written
    assert "vault_error" in caplog.text
