"""Endpoints of part 4.1 and the customer's payment call ``POST /pay/{lookup_id}``.

Create and read-by-lookup accept a publishable key (manual capture or a ``card_token`` then
answers 403); capture, cancel, refund, list and count need a secret key. ``/pay/…`` carries no
key: the unguessable lookup id addresses the intent, and the customer's card is the only other
input.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from aiohttp import web
from pydantic import BaseModel, Field, StringConstraints

from treasury_aiohttp.api.records import render_refund
from treasury_aiohttp.api.shapes import act
from treasury_aiohttp.hosted import pages as hosted_pages
from treasury_aiohttp.hosted.forms import CARD_INT_FIELDS, is_form, json_or_form, wants_html
from treasury_aiohttp.hosted.security import check_same_origin
from treasury_aiohttp.io import (
    Responder,
    json_response,
    list_response,
    page_request,
    parse_body,
    principal,
    timestamp_query,
    treasury,
)
from treasury_aiohttp.query import currency, filters, intent_status, text
from treasury_aiohttp.rendering import intent_json
from treasury_aiohttp.routing import Auth, Param, Route
from treasury_core.companies import Principal
from treasury_core.errors import ValidationFailed
from treasury_core.interface.records import PaymentIntentRecord, RefundRecord, TransactionRecord
from treasury_core.metadata import metadata_filter
from treasury_core.payments import IntentFilter, IntentStatus, PaymentIntent
from treasury_core.payments.requests import (
    ChallengeRequest,
    CreateIntentRequest,
    IntentActionRequest,
    PayRequest,
    RefundRequest,
)
from treasury_core.services.payments import PaymentOutcome, check_publishable_create
from treasury_core.services.payments.saved_cards import card_data
from treasury_core.validation import whole_number

_MAX_INTENT_ID = 2**63 - 1


class CountRecord(BaseModel):
    """``GET /api/v1/payments/intents/count``."""

    count: int


class NextAction(BaseModel):
    """What the customer must do before the payment can go on: pass 3-D Secure at ``url``."""

    type: Literal["three_d_secure"] = "three_d_secure"
    url: str


class PaymentAttemptRecord(BaseModel):
    """The answer of ``POST /pay/{lookup_id}``: the intent's new ``status`` and the attempt."""

    status: IntentStatus
    payment_intent_lookup_id: str
    transaction: TransactionRecord
    next_action: NextAction | None = None


def _intent_record(intent: PaymentIntent) -> bytes:
    return intent_json(intent)


async def create_intent(request: web.Request) -> web.StreamResponse:
    """Create a payment intent; with ``card_token`` the saved card is charged at once."""
    body = await parse_body(request, CreateIntentRequest)
    caller = principal(request)
    responder: Responder[PaymentIntent] = Responder(request, _intent_record)
    intent = await treasury(request).payments.create(
        caller.company_id,
        body,
        publishable=not caller.is_secret,
        idempotency=responder.ticket(),
    )
    return responder.respond(intent)


async def authorize_create(request: web.Request, caller: Principal) -> None:
    """A publishable key's limits on a new intent (manual capture, ``card_token``: 403), checked
    on the body before an idempotent replay could answer it."""
    if caller.is_secret:
        return
    try:
        body = await parse_body(request, CreateIntentRequest)
    except ValidationFailed:
        # A body that does not parse asks for nothing yet; the handler refuses it under the
        # idempotency key, as any bad body is.
        return
    check_publishable_create(body)


async def get_intent(request: web.Request) -> web.StreamResponse:
    """The intent with ``payment_intent_lookup_id`` (polling, for reconciliation)."""
    lookup_id = request.query.get("payment_intent_lookup_id")
    if not lookup_id:
        raise ValidationFailed(
            "Missing required parameter: payment_intent_lookup_id",
            code="parameter_missing",
            param="payment_intent_lookup_id",
        )
    intent = await treasury(request).payments.get_by_lookup_id(
        principal(request).company_id, lookup_id
    )
    return json_response(intent_json(intent))


async def capture_intent(request: web.Request) -> web.StreamResponse:
    """Capture the full authorized amount: the intent becomes ``PROCESSED``."""
    payments = treasury(request).payments
    return await act(
        request,
        IntentActionRequest,
        _intent_record,
        lambda company, body, ticket: payments.capture(
            company, body.payment_intent_id, idempotency=ticket
        ),
    )


async def cancel_authorization(request: web.Request) -> web.StreamResponse:
    """Release the hold: the intent becomes ``CANCELLED`` with reason ``voided``."""
    payments = treasury(request).payments
    return await act(
        request,
        IntentActionRequest,
        _intent_record,
        lambda company, body, ticket: payments.cancel(
            company, body.payment_intent_id, idempotency=ticket
        ),
    )


async def refund_intent(request: web.Request) -> web.StreamResponse:
    """Refund part or all of what remains of a ``PROCESSED`` intent."""
    payments = treasury(request).payments
    return await act(
        request,
        RefundRequest,
        render_refund,
        lambda company, body, ticket: payments.refund(
            company,
            body.payment_intent_id,
            amount=body.amount,
            reason=body.reason,
            idempotency=ticket,
        ),
    )


def _positive_int(request: web.Request, name: str, maximum: int = _MAX_INTENT_ID) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    # A whole number as JSON writes it ("5", "5.0"), as the document's "integer" promises.
    value = whole_number(raw)
    if value is None or not 1 <= value <= maximum:
        raise ValidationFailed(f"{name} must be a positive integer", param=name)
    return value


def _filters(request: web.Request) -> IntentFilter:
    return IntentFilter(
        status=intent_status(request.query.get("status")),
        account_id=_positive_int(request, "account_id"),
        created_gte=timestamp_query(request, "created_gte"),
        created_lt=timestamp_query(request, "created_lt"),
        merchant_reference=text(request, "merchant_reference"),
        customer_email=text(request, "customer_email"),
        currency=currency(request),
        metadata=metadata_filter(request.query),
    )


async def list_intents(request: web.Request) -> web.StreamResponse:
    """The company's intents, newest first, filtered by status, account and creation time."""
    filters = _filters(request)
    limit = page_request(request).limit
    page = await treasury(request).payments.list(
        principal(request).company_id,
        filters,
        limit=limit,
        starting_after=_positive_int(request, "starting_after"),
    )
    records = [PaymentIntentRecord.of(i) for i in page.items]
    return list_response(request, records, page, PaymentIntentRecord, lambda r: str(r.id))


async def count_intents(request: web.Request) -> web.StreamResponse:
    """How many of the company's intents pass the same filters as the list."""
    count = await treasury(request).payments.count(principal(request).company_id, _filters(request))
    return json_response(CountRecord(count=count))


def _attempt(request: web.Request, outcome: PaymentOutcome) -> web.Response:
    lookup_id = outcome.intent.payment_intent_lookup_id
    txn = outcome.transaction
    action = None
    if txn.status.value == "requires_action":
        action = NextAction(url=f"/pay/{lookup_id}/challenge")
    return json_response(
        PaymentAttemptRecord(
            status=outcome.intent.status,
            payment_intent_lookup_id=lookup_id,
            transaction=TransactionRecord.of(txn),
            next_action=action,
        )
    )


async def pay(request: web.Request) -> web.StreamResponse:
    """The customer pays the intent: authorized (manual capture) or charged (automatic).

    A decline answers 402 with ``failure_reason`` and leaves the intent payable; a 3-D Secure
    card answers ``next_action``. A browser posting the hosted form gets pages back instead.
    """
    if wants_html(request) and is_form(request):
        return await hosted_pages.pay_from_form(request)  # checks the origin and CSRF itself
    check_same_origin(request)
    body, _ = await json_or_form(request, PayRequest, int_fields=CARD_INT_FIELDS)
    outcome = await treasury(request).payments.pay(
        request.match_info["payment_intent_lookup_id"], card_data(body)
    )
    return _attempt(request, outcome)


async def complete_challenge(request: web.Request) -> web.StreamResponse:
    """The customer's 3-D Secure answer: ``pass`` completes the payment, ``fail`` declines it."""
    if wants_html(request) and is_form(request):
        return await hosted_pages.challenge_from_form(request)  # checks origin and CSRF itself
    check_same_origin(request)
    body, _ = await json_or_form(request, ChallengeRequest)
    outcome = await treasury(request).payments.complete_challenge(
        request.match_info["payment_intent_lookup_id"], passed=body.outcome == "pass"
    )
    return _attempt(request, outcome)


_PAYMENTS = ("Payments",)
_LOOKUP = {"payment_intent_lookup_id": "The intent's lookup id (`pil_…`)."}
_LOOKUP_QUERY = {
    "payment_intent_lookup_id": Param(
        _LOOKUP["payment_intent_lookup_id"],
        Annotated[str, StringConstraints(min_length=1)],
        required=True,
    )
}
#: What ``_positive_int`` reads: an integer id (intent ids, account ids).
_QueryId = Annotated[int, Field(ge=1, le=_MAX_INTENT_ID)]
_FILTERS = {
    "status": Param("Only intents in this state.", IntentStatus),
    "account_id": Param("Only intents of this merchant account.", _QueryId),
    "created_gte": Param("Only intents created at or after this ISO 8601 timestamp.", datetime),
    "created_lt": Param("Only intents created before this ISO 8601 timestamp.", datetime),
    **{
        name: param
        for name, param in filters(
            "merchant_reference", "customer_email", "currency", "metadata", noun="intents"
        ).items()
        if name not in ("status", "created_gte", "created_lt")
    },
}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/payments/intent",
        create_intent,
        "Create a payment intent",
        auth=Auth.PUBLISHABLE,
        authorize=authorize_create,
        body=CreateIntentRequest,
        response=PaymentIntentRecord,
        tags=_PAYMENTS,
        description=(
            "A publishable key may create automatic-capture intents only, without `card_token`."
        ),
    ),
    Route(
        "GET",
        "/api/v1/payments/intent",
        get_intent,
        "Get a payment intent by lookup id",
        auth=Auth.PUBLISHABLE,
        response=PaymentIntentRecord,
        tags=_PAYMENTS,
        query_params=_LOOKUP_QUERY,
    ),
    Route(
        "POST",
        "/api/v1/payments/intent/capture",
        capture_intent,
        "Capture an authorized payment intent",
        body=IntentActionRequest,
        response=PaymentIntentRecord,
        tags=_PAYMENTS,
    ),
    Route(
        "POST",
        "/api/v1/payments/intent/cancel-authorization",
        cancel_authorization,
        "Cancel an authorization",
        body=IntentActionRequest,
        response=PaymentIntentRecord,
        tags=_PAYMENTS,
    ),
    Route(
        "POST",
        "/api/v1/payments/intent/refund",
        refund_intent,
        "Refund a processed payment intent",
        body=RefundRequest,
        response=RefundRecord,
        tags=_PAYMENTS,
    ),
    Route(
        "GET",
        "/api/v1/payments/intents",
        list_intents,
        "List payment intents",
        response=PaymentIntentRecord,
        is_list=True,
        tags=_PAYMENTS,
        query_params=_FILTERS,
        cursor=_QueryId,
    ),
    Route(
        "GET",
        "/api/v1/payments/intents/count",
        count_intents,
        "Count payment intents",
        response=CountRecord,
        tags=_PAYMENTS,
        query_params=_FILTERS,
    ),
    Route(
        "POST",
        "/pay/{payment_intent_lookup_id}",
        pay,
        "Pay a payment intent (the customer)",
        auth=Auth.NONE,
        body=PayRequest,
        response=PaymentAttemptRecord,
        tags=_PAYMENTS,
        path_params=_LOOKUP,
        description="JSON or the hosted form's fields; no API key. A browser posting the "
        "form (`Accept: text/html`) gets the hosted pages back.",
    ),
    Route(
        "POST",
        "/pay/{payment_intent_lookup_id}/challenge",
        complete_challenge,
        "Answer a 3-D Secure challenge (the customer)",
        auth=Auth.NONE,
        body=ChallengeRequest,
        response=PaymentAttemptRecord,
        tags=_PAYMENTS,
        path_params=_LOOKUP,
    ),
)
