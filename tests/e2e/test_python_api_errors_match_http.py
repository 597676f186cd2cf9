"""Bad input given from Python raises the error the HTTP app answers for the same input.

Each case sends a body to the HTTP app and passes the same values through the Python API (the
request model built by hand, or the service's own arguments); the 400 body and the Python
error's body (``error_body()``) must be equal, ``param`` and message included.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from pydantic import BaseModel

from tests.e2e.conftest import Tenant
from treasury_core import (
    CreateDepositRequest,
    CreateIntentRequest,
    CreateTokenIntentRequest,
    CreateTransferRequest,
    CreateVirtualAccountRequest,
    CreateWalletRequest,
    CreateWebhookEndpointRequest,
    CreateWithdrawalRequest,
    RegisterBankAccountRequest,
    Treasury,
    TreasuryError,
    ValidationFailed,
)
from treasury_core.interface.errors import error_body
from treasury_core.notifications.endpoints import (
    RotateWebhookSecretRequest,
    UpdateWebhookEndpointRequest,
)
from treasury_core.payments.disputes import ChargebackEvidence
from treasury_core.payments.requests import CardSubmission

Client = TestClient[Any, Any]
PythonCall = Callable[[Treasury, Tenant], Awaitable[object]]


@dataclass(frozen=True)
class Case:
    path: str
    body: dict[str, Any]
    #: ``None``: the request model of the route, built from ``body``.
    model: type[BaseModel] | None = None
    call: PythonCall | None = None


def _model(path: str, model: type[BaseModel], **body: Any) -> Case:
    return Case(path, body, model=model)


def _call(path: str, call: PythonCall, **body: Any) -> Case:
    return Case(path, body, call=call)


INTENT = {"account_id": 1, "billing_amount": 100, "billing_currency": "USD"}
TOKEN = {"account_id": 1, "payment_type": "Tokenization", "customer_phone_number": "+15551234"}
CARD = {"card_number": "4242424242424242", "expiry_month": 12, "expiry_year": 2040, "cvc": "123"}

CASES = [
    _model("/api/v1/wallet", CreateWalletRequest, name="x"),
    _model("/api/v1/wallet", CreateWalletRequest, name="x", currency_id="US"),
    _model("/api/v1/wallet", CreateWalletRequest, name=5, currency_id="USD"),
    _model("/api/v1/wallet", CreateWalletRequest, name="a\x00b", currency_id="USD"),
    _model("/api/v1/wallet", CreateWalletRequest, name="x", currency_id="USD", colour="red"),
    _model("/api/v1/wallet", CreateWalletRequest, name="x", currency_id="USD", metadata={"a": 1}),
    _model(
        "/api/v1/deposit",
        CreateDepositRequest,
        wallet_id="wal_x",
        from_amount=0,
        from_currency_id="USD",
    ),
    _model(
        "/api/v1/deposit",
        CreateDepositRequest,
        wallet_id="wal_x",
        from_amount="100",
        from_currency_id="USD",
    ),
    _model(
        "/api/v1/transfer",
        CreateTransferRequest,
        from_wallet_id="wal_a",
        to_wallet_id="wal_b",
        from_amount=-5,
    ),
    _model(
        "/api/v1/transfer",
        CreateTransferRequest,
        from_wallet_id="wal_a",
        to_wallet_id="wal_b",
        from_amount=5,
        reference="r" * 256,
    ),
    _model(
        "/api/v1/withdraw",
        CreateWithdrawalRequest,
        wallet_id="wal_x",
        from_amount=5,
        from_currency_id="USD",
    ),
    _model(
        "/api/v1/bank-account",
        RegisterBankAccountRequest,
        bank_name="Bank",
        account_name="Ops",
        account_number="",
        routing_number="1",
        currency_id="USD",
    ),
    _model(
        "/api/v1/virtual-account",
        CreateVirtualAccountRequest,
        wallet_id="wal_x",
        source_currency="EURO",
    ),
    _model("/api/v1/payments/intent", CreateIntentRequest, **INTENT, payment_type="Bitcoin"),
    _model(
        "/api/v1/payments/intent",
        CreateIntentRequest,
        **INTENT,
        payment_type="Card Payment",
        callback_url="ftp://shop.example/hook",
    ),
    _model(
        "/api/v1/payments/intent",
        CreateIntentRequest,
        **{**INTENT, "account_id": 0},
        payment_type="Card Payment",
    ),
    _model(
        "/api/v1/payment_method_token_intent",
        CreateTokenIntentRequest,
        **TOKEN,
        customer_email="nobody",
    ),
    _model("/api/v1/webhook-endpoints", CreateWebhookEndpointRequest, url="not a url"),
    _model(
        "/api/v1/webhook-endpoints",
        CreateWebhookEndpointRequest,
        url="https://shop.example/hooks",
        events=[],
    ),
    _model("/api/v1/webhook-endpoints/we_x", UpdateWebhookEndpointRequest, enabled="yes"),
    _model(
        "/api/v1/webhook-endpoints/we_x/rotate-secret",
        RotateWebhookSecretRequest,
        overlap_seconds=-1,
    ),
    _model("/api/v1/payments/chargeback/cb_x/evidence", ChargebackEvidence, customer_name=7),
    _model(
        "/api/v1/payment_method_token_intent/pmti_x/confirm/secret",
        CardSubmission,
        **{**CARD, "expiry_month": 13},
    ),
    _call(
        "/api/v1/payments/intent/refund",
        lambda t, tenant: t.payments.refund(tenant.company_id, 1, amount=0),
        payment_intent_id=1,
        amount=0,
    ),
    _call(
        "/api/v1/payments/intent/refund",
        lambda t, tenant: t.payments.refund(tenant.company_id, 1, reason="r" * 256),
        payment_intent_id=1,
        reason="r" * 256,
    ),
    _call(
        "/api/v1/payments/intent/capture",
        lambda t, tenant: t.payments.capture(tenant.company_id, 0),
        payment_intent_id=0,
    ),
    _call(
        "/api/v1/payments/intent/cancel-authorization",
        lambda t, tenant: t.payments.cancel(tenant.company_id, 2**63),
        payment_intent_id=2**63,
    ),
    _call(
        "/api/v1/payments/intent/expire",
        lambda t, tenant: t.payment_links.expire(tenant.company_id, -1),
        payment_intent_id=-1,
    ),
    _call(
        "/api/v1/sandbox/clock/advance",
        lambda t, tenant: t.sandbox.advance(0),
        seconds=0,
    ),
    _call(
        "/api/v1/sandbox/deposits/dep_x/complete",
        lambda t, tenant: t.deposits.complete(tenant.company_id, "dep_x", amount=0),
        amount=0,
    ),
    _call(
        "/api/v1/sandbox/deposits/dep_x/fail",
        lambda t, tenant: t.deposits.fail(tenant.company_id, "dep_x", code=""),
        code="",
    ),
    _call(
        "/api/v1/sandbox/withdrawals/wdr_x/fail",
        lambda t, tenant: t.withdrawals.fail(tenant.company_id, "wdr_x", message="a\nb"),
        message="a\nb",
    ),
    _call(
        "/api/v1/sandbox/transfers/trf_x/fail",
        lambda t, tenant: t.transfers.fail(tenant.company_id, "trf_x", code=5),
        code=5,
    ),
    _call(
        "/api/v1/sandbox/virtual-accounts/va_x/incoming",
        lambda t, tenant: t.virtual_accounts.incoming(tenant.company_id, "va_x", 0),
        amount=0,
    ),
]


def _case_id(case: Case) -> str:
    first = next(iter(case.body), "")
    return f"{case.path}:{first}"


async def _from_python(case: Case, treasury: Treasury, tenant: Tenant) -> None:
    if case.model is not None:
        case.model(**case.body)
    else:
        assert case.call is not None
        await case.call(treasury, tenant)


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
async def test_the_python_error_is_the_http_body(
    client: Client, tenant: Tenant, treasury: Treasury, case: Case
) -> None:
    response = await client.post(case.path, json=case.body, headers=tenant.auth)
    assert response.status == 400
    answered = await response.json()

    with pytest.raises(TreasuryError) as raised:
        await _from_python(case, treasury, tenant)
    assert isinstance(raised.value, ValidationFailed)
    assert error_body(raised.value) == answered
    assert raised.value.param is not None


async def test_metadata_updates_from_python_are_refused_as_over_http(
    client: Client, tenant: Tenant, treasury: Treasury
) -> None:
    wallet = await treasury.wallets.create(
        tenant.company_id, CreateWalletRequest(name="Ops", currency_id="USD")
    )
    bad = {"note": 5}
    response = await client.post(
        f"/api/v1/wallet/{wallet.id}/metadata", json={"metadata": bad}, headers=tenant.auth
    )
    assert response.status == 400
    with pytest.raises(ValidationFailed) as raised:
        await treasury.wallets.update_metadata(tenant.company_id, wallet.id, bad)  # type: ignore[dict-item]
    assert error_body(raised.value) == await response.json()
    assert raised.value.param == "metadata.note"
    assert (await treasury.wallets.get(tenant.company_id, wallet.id)).metadata == {}
