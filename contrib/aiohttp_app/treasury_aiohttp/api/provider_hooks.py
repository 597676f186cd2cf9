"""``POST /hooks/stripe``: the card provider's webhook deliveries (Stripe's events).

No API key: Stripe authenticates each delivery by its ``Stripe-Signature`` header, which the
card provider's adapter verifies with the webhook secret before anything is read. The route
exists only while the card provider is ``stripe`` with ``TREASURY_STRIPE_WEBHOOK_SECRET`` set;
otherwise the path answers 404 like any unknown one (and the OpenAPI document leaves it out).
"""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel

from treasury_aiohttp.io import json_response, treasury
from treasury_aiohttp.routing import Auth, Route
from treasury_core import Treasury
from treasury_core.services.payments.provider_events import EventResult

STRIPE_HOOK_PATH = "/hooks/stripe"


class WebhookReceipt(BaseModel):
    """The answer to an authentic delivery: Stripe stops redelivering it."""

    received: bool = True
    #: What the event did: ``applied``, ``nothing_to_do``, ``duplicate`` (delivered before),
    #: ``unknown_charge`` (no intent here made the charge) or ``not_mapped`` (an event type
    #: treasury-core does not act on).
    result: EventResult


async def stripe_webhook(request: web.Request) -> web.StreamResponse:
    """One Stripe event, verified by its signature and applied once.

    Every authentic delivery answers 200, an event about a charge this treasury does not know
    included (it is logged and ignored, so that Stripe stops retrying it); a redelivery answers
    200 and changes nothing. A missing or wrong signature, one older than 300 seconds, or a body
    that is not a Stripe event answers 400 (`webhook_signature_invalid`,
    `webhook_body_invalid`) and changes nothing.
    """
    body = await request.read()  # the body limit middleware read (and capped) it already
    outcome = await treasury(request).provider_events.receive(body, request.headers)
    return json_response(WebhookReceipt(result=outcome.result))


ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        STRIPE_HOOK_PATH,
        stripe_webhook,
        "Receive a Stripe webhook (the stripe card provider's events)",
        auth=Auth.NONE,
        response=WebhookReceipt,
        tags=("Card provider webhooks",),
        description=(
            "The body is Stripe's event JSON exactly as sent, signed in the `Stripe-Signature` "
            "header (`t=…,v1=…`) with the endpoint's secret. Served only with "
            "`TREASURY_CARD_PROVIDER=stripe` and `TREASURY_STRIPE_WEBHOOK_SECRET` set."
        ),
    ),
)


def routes_for(served: Treasury) -> tuple[Route, ...]:
    """The webhook routes ``served`` answers: Stripe's when its provider is Stripe and can
    verify events (its webhook secret is set); none otherwise."""
    if served.config.card_provider == "stripe" and served.provider_events.supported():
        return ROUTES
    return ()
