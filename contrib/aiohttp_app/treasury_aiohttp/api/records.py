"""Every record readable: retrieve and list refunds, chargebacks, payouts, deposits,
bank accounts and saved cards; an intent by its integer id; delete a bank account; forget a
saved card.

Paths follow the interface's style: the singular noun and an id for one record
(``/api/v1/deposit/{deposit_id}``), the plural for the list (``/api/v1/withdrawals``); the
records of a payment live under ``/api/v1/payments/``. Each list declares its filters in its
route (see :mod:`treasury_aiohttp.query`); every one needs a secret key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel

from treasury_aiohttp.api.shapes import get_one, list_records
from treasury_aiohttp.io import json_response, list_response, page_request, principal, treasury
from treasury_aiohttp.query import filters, text
from treasury_aiohttp.rendering import intent_json
from treasury_aiohttp.routing import Param, Route
from treasury_core.cards.tokens import PaymentMethodToken
from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.interface.projections import record_of
from treasury_core.interface.records import (
    BankAccountRecord,
    ChargebackRecord,
    DepositRecord,
    PaymentIntentRecord,
    PaymentMethodTokenRecord,
    PayoutRecord,
    RefundRecord,
)
from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    MovementStatus,
    TreasuryRecord,
)
from treasury_core.payments.records import (
    Chargeback,
    ChargebackStatus,
    Payout,
    PayoutStatus,
    Refund,
    RefundStatus,
)
from treasury_core.validation import Email, whole_number

# --- renderers: one per kind, the only place its API record is made ---------------------------


def render_refund(refund: Refund) -> BaseModel:
    """The API's record of a refund: the answer of the refund call, of its ``GET`` and of the
    list alike (a field the refund gains is added here, once)."""
    return RefundRecord.of(refund)


def render_chargeback(chargeback: Chargeback) -> BaseModel:
    """The API's record of a chargeback: its ``GET`` and the list alike (a field the chargeback
    gains is added here, once)."""
    return ChargebackRecord.of(chargeback)


def _render(record: TreasuryRecord) -> BaseModel:
    return record_of(record)


#: Per kind: its renderer and its API model (what lists and the OpenAPI document show).
RENDERERS: dict[type[TreasuryRecord], tuple[Callable[[Any], BaseModel], type[BaseModel]]] = {
    Refund: (render_refund, RefundRecord),
    Chargeback: (render_chargeback, ChargebackRecord),
    Payout: (_render, PayoutRecord),
    Deposit: (_render, DepositRecord),
    BankAccount: (_render, BankAccountRecord),
    PaymentMethodToken: (_render, PaymentMethodTokenRecord),
}


def _getter(kind: type[TreasuryRecord], param: str) -> Callable[[web.Request], Any]:
    render, _ = RENDERERS[kind]

    async def get(request: web.Request) -> web.StreamResponse:
        records = treasury(request).records
        return await get_one(request, lambda c, i: records.get(kind, c, i), param, render)

    return get


def _lister(kind: type[TreasuryRecord]) -> Callable[[web.Request], Any]:
    render, model = RENDERERS[kind]

    async def list_(request: web.Request) -> web.StreamResponse:
        return await list_records(request, kind, model, render)

    return list_


def _named(handler: Callable[[web.Request], Any], name: str, doc: str) -> Any:
    # The OpenAPI operation id is the handler's name, its description the docstring.
    handler.__name__ = handler.__qualname__ = name
    handler.__doc__ = doc
    return handler


get_refund = _named(_getter(Refund, "refund_id"), "get_refund", "One refund.")
list_refunds = _named(
    _lister(Refund), "list_refunds", "The company's refunds, newest first (failed ones too)."
)
get_chargeback = _named(_getter(Chargeback, "chargeback_id"), "get_chargeback", "One chargeback.")
list_chargebacks = _named(
    _lister(Chargeback), "list_chargebacks", "The company's chargebacks, newest first."
)
get_payout = _named(_getter(Payout, "payout_id"), "get_payout", "One payout.")
list_payouts = _named(
    _lister(Payout),
    "list_payouts",
    "Payouts of settled card funds into the company's wallets, newest first.",
)
list_deposits = _named(
    _lister(Deposit),
    "list_deposits",
    "The company's deposits, newest first (virtual-account credits too).",
)
get_bank_account = _named(
    _getter(BankAccount, "bank_account_id"),
    "get_bank_account",
    "One registered bank account (the number masked but for `last4`).",
)
list_bank_accounts = _named(
    _lister(BankAccount), "list_bank_accounts", "The company's bank accounts, newest first."
)


async def delete_bank_account(request: web.Request) -> web.StreamResponse:
    """Delete a bank account no pending withdrawal pays out to; the answer is the record with
    status `deleted`. Completed and failed withdrawals keep naming it."""
    deleted = await treasury(request).records.delete_bank_account(
        principal(request).company_id, request.match_info["bank_account_id"]
    )
    return json_response(BankAccountRecord.of(deleted))


async def get_intent_by_id(request: web.Request) -> web.StreamResponse:
    """A payment intent by its integer id."""
    raw = request.match_info["payment_intent_id"]
    intent_id = whole_number(raw) if raw.isascii() and raw.isdigit() else None
    if intent_id is None or not 1 <= intent_id < 2**63:
        raise NotFound(
            f"No such payment intent: {raw}" if raw.isprintable() else "No such payment intent",
            param="payment_intent_id",
        )
    intent = await treasury(request).payments.get(principal(request).company_id, intent_id)
    return json_response(intent_json(intent))


async def list_payment_method_tokens(request: web.Request) -> web.StreamResponse:
    """The saved cards of one customer (`customer_email`), newest first."""
    email = text(request, "customer_email")
    if email is None:
        raise ValidationFailed(
            "Missing required parameter: customer_email",
            code="parameter_missing",
            param="customer_email",
        )
    page = await treasury(request).records.tokens(
        principal(request).company_id, email, page_request(request)
    )
    items = [PaymentMethodTokenRecord.of(t) for t in page.items]
    return list_response(request, items, page, PaymentMethodTokenRecord, lambda r: r.id)


async def delete_payment_method_token(request: web.Request) -> web.StreamResponse:
    """Forget a saved card (the customer's right to be forgotten): its vault entry and the
    customer's details are erased; charging it afterwards is refused with
    `payment_method_token_deleted`. The answer is the token with status `deleted`."""
    forgotten = await treasury(request).records.forget_token(
        principal(request).company_id, request.match_info["token_id"]
    )
    return json_response(PaymentMethodTokenRecord.of(forgotten))


_PAYMENTS = ("Payments",)
_REFUND_ID = {"refund_id": "Refund id (`re_…`)."}
_CHARGEBACK_ID = {"chargeback_id": "Chargeback id (`cb_…`)."}
_PAYOUT_ID = {"payout_id": "Payout id (`po_…`)."}
_BANK_ACCOUNT_ID = {"bank_account_id": "Bank account id (`ba_…`)."}
#: Beside ``/bank-account/formats`` and ``/bank-names``: only a ``ba_`` id is a bank account.
_BANK_ACCOUNT_PATTERN = {"bank_account_id": "ba_[^/]*"}
_TOKEN_ID = {"token_id": "The token (`pmt_…`)."}

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/api/v1/payments/intent/{payment_intent_id}",
        get_intent_by_id,
        "Get a payment intent by id",
        response=PaymentIntentRecord,
        tags=_PAYMENTS,
        path_params={"payment_intent_id": "The intent's integer id."},
        path_patterns={"payment_intent_id": "[0-9]+"},
    ),
    Route(
        "GET",
        "/api/v1/payments/refund/{refund_id}",
        get_refund,
        "Get a refund",
        response=RefundRecord,
        tags=_PAYMENTS,
        path_params=_REFUND_ID,
    ),
    Route(
        "GET",
        "/api/v1/payments/refunds",
        list_refunds,
        "List refunds",
        response=RefundRecord,
        is_list=True,
        tags=_PAYMENTS,
        query_params=filters(
            "payment_intent_id", "currency", statuses=RefundStatus, noun="refunds"
        ),
    ),
    Route(
        "GET",
        "/api/v1/payments/chargeback/{chargeback_id}",
        get_chargeback,
        "Get a chargeback",
        response=ChargebackRecord,
        tags=_PAYMENTS,
        path_params=_CHARGEBACK_ID,
    ),
    Route(
        "GET",
        "/api/v1/payments/chargebacks",
        list_chargebacks,
        "List chargebacks",
        response=ChargebackRecord,
        is_list=True,
        tags=_PAYMENTS,
        query_params=filters(
            "payment_intent_id", "currency", statuses=ChargebackStatus, noun="chargebacks"
        ),
    ),
    Route(
        "GET",
        "/api/v1/payments/payout/{payout_id}",
        get_payout,
        "Get a payout",
        response=PayoutRecord,
        tags=_PAYMENTS,
        path_params=_PAYOUT_ID,
    ),
    Route(
        "GET",
        "/api/v1/payments/payouts",
        list_payouts,
        "List payouts",
        response=PayoutRecord,
        is_list=True,
        tags=_PAYMENTS,
        query_params=filters(
            "payment_intent_id", "wallet_id", "currency", statuses=PayoutStatus, noun="payouts"
        ),
    ),
    Route(
        "GET",
        "/api/v1/deposits",
        list_deposits,
        "List deposits",
        response=DepositRecord,
        is_list=True,
        tags=("Deposits",),
        query_params=filters(
            "wallet_id", "currency", "metadata", statuses=MovementStatus, noun="deposits"
        ),
    ),
    Route(
        "GET",
        "/api/v1/bank-account/{bank_account_id}",
        get_bank_account,
        "Get a bank account",
        response=BankAccountRecord,
        tags=("Bank accounts",),
        path_params=_BANK_ACCOUNT_ID,
        path_patterns=_BANK_ACCOUNT_PATTERN,
    ),
    Route(
        "DELETE",
        "/api/v1/bank-account/{bank_account_id}",
        delete_bank_account,
        "Delete a bank account",
        response=BankAccountRecord,
        tags=("Bank accounts",),
        path_params=_BANK_ACCOUNT_ID,
        path_patterns=_BANK_ACCOUNT_PATTERN,
    ),
    Route(
        "GET",
        "/api/v1/bank-accounts",
        list_bank_accounts,
        "List bank accounts",
        response=BankAccountRecord,
        is_list=True,
        tags=("Bank accounts",),
        query_params=filters(
            "currency", "metadata", statuses=Literal["active"], noun="bank accounts"
        ),
    ),
    Route(
        "GET",
        "/api/v1/payment_method_tokens",
        list_payment_method_tokens,
        "List a customer's saved cards",
        response=PaymentMethodTokenRecord,
        is_list=True,
        tags=("Card on file",),
        query_params={
            "customer_email": Param("The customer whose saved cards to list.", Email, True)
        },
    ),
    Route(
        "DELETE",
        "/api/v1/payment_method_tokens/{token_id}",
        delete_payment_method_token,
        "Delete a saved card",
        response=PaymentMethodTokenRecord,
        tags=("Card on file",),
        path_params=_TOKEN_ID,
    ),
)

__all__ = ["RENDERERS", "ROUTES", "render_chargeback", "render_refund"]
