"""Closing a payment link and changing an intent's metadata (decisions.md).

Both need a secret key: closing a link stops a customer from paying, and metadata is the
merchant's own bookkeeping.
"""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp.api.shapes import act
from treasury_aiohttp.io import treasury
from treasury_aiohttp.rendering import intent_json
from treasury_aiohttp.routing import Route
from treasury_core.errors import NotFound
from treasury_core.interface.records import PaymentIntentRecord
from treasury_core.payments import PaymentIntent
from treasury_core.payments.requests import IntentActionRequest, MetadataUpdateRequest
from treasury_core.validation import whole_number

_MAX_INTENT_ID = 2**63 - 1


def _intent_record(intent: PaymentIntent) -> bytes:
    return intent_json(intent)


def path_intent_id(request: web.Request) -> int:
    """``{payment_intent_id}`` of the path; one that is not a positive integer names no intent."""
    raw = request.match_info["payment_intent_id"]
    value = whole_number(raw) if raw.isdigit() else None
    if value is None or not 1 <= value <= _MAX_INTENT_ID:
        raise NotFound("No such payment intent", param="payment_intent_id")
    return value


async def expire_intent(request: web.Request) -> web.StreamResponse:
    """Close the intent's payment link now (it can no longer be paid)."""
    links = treasury(request).payment_links
    return await act(
        request,
        IntentActionRequest,
        _intent_record,
        lambda company, body, ticket: links.expire(
            company, body.payment_intent_id, idempotency=ticket
        ),
    )


async def update_intent_metadata(request: web.Request) -> web.StreamResponse:
    """Merge pairs into the intent's metadata; an empty value deletes its key."""
    intent_id = path_intent_id(request)
    links = treasury(request).payment_links
    return await act(
        request,
        MetadataUpdateRequest,
        _intent_record,
        lambda company, body, ticket: links.update_metadata(
            company, intent_id, body.metadata, idempotency=ticket
        ),
    )


_PAYMENTS = ("Payments",)

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/payments/intent/expire",
        expire_intent,
        "Close a payment intent's payment link",
        body=IntentActionRequest,
        response=PaymentIntentRecord,
        tags=_PAYMENTS,
        description=(
            "An unpaid intent (`INITIALIZED`, or a voided `CANCELLED` one) gets `expires_at` = "
            "now and can no longer be paid; `merchant_of_record.payment_intent.expired` fires. "
            "A link already closed is answered as it is; an `AUTHORIZED` or `PROCESSED` intent "
            "is 400 `payment_intent_unexpected_state`."
        ),
    ),
    Route(
        "POST",
        "/api/v1/payments/intent/{payment_intent_id}/metadata",
        update_intent_metadata,
        "Update a payment intent's metadata",
        body=MetadataUpdateRequest,
        response=PaymentIntentRecord,
        tags=_PAYMENTS,
        path_params={"payment_intent_id": "The intent's integer id."},
        description='The pairs are merged into the intent\'s metadata; `""` deletes a key.',
    ),
)
