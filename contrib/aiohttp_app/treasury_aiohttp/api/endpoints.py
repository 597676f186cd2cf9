"""Managing a webhook endpoint: update its URL, event types or enabled flag, and
rotate its signing secret with an overlap during which deliveries carry both signatures."""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp.api.notifications import _replay_endpoint
from treasury_aiohttp.io import Responder, parse_body, principal, treasury
from treasury_aiohttp.routing import Route
from treasury_core.interface.records import WebhookEndpointRecord
from treasury_core.notifications.endpoints import (
    RotateWebhookSecretRequest,
    UpdateWebhookEndpointRequest,
    WebhookEndpoint,
)
from treasury_core.services.notifications.endpoints import (
    CreatedEndpoint,
    rotate_secret,
    update_endpoint,
)


async def update_webhook_endpoint(request: web.Request) -> web.StreamResponse:
    """Change an endpoint's ``url``, ``events`` or ``enabled``; the fields left out stay."""
    body = await parse_body(request, UpdateWebhookEndpointRequest)
    responder: Responder[WebhookEndpoint] = Responder(request, WebhookEndpointRecord.of)
    updated = await update_endpoint(
        treasury(request).notifications,
        principal(request).company_id,
        request.match_info["endpoint_id"],
        body,
        idempotency=responder.ticket(),
    )
    return responder.respond(updated)


async def rotate_webhook_secret(request: web.Request) -> web.StreamResponse:
    """Give an endpoint a new signing secret, shown this once; the old one keeps signing
    beside it until ``previous_secret_expires_at``."""
    body = await parse_body(request, RotateWebhookSecretRequest)
    # As on create: the stored copy leaves the secret out; a replay derives it again.
    responder: Responder[CreatedEndpoint] = Responder(
        request,
        lambda rotated: WebhookEndpointRecord.of(rotated.endpoint, secret=rotated.secret),
        render_stored=lambda rotated: WebhookEndpointRecord.of(rotated.endpoint),
    )
    rotated = await rotate_secret(
        treasury(request).notifications,
        principal(request).company_id,
        request.match_info["endpoint_id"],
        body,
        idempotency=responder.ticket(),
    )
    return responder.respond(rotated)


_EVENTS = ("Events and webhooks",)
_ENDPOINT = {"endpoint_id": "The endpoint's id (`we_…`)."}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/webhook-endpoints/{endpoint_id}",
        update_webhook_endpoint,
        "Update a webhook endpoint",
        body=UpdateWebhookEndpointRequest,
        response=WebhookEndpointRecord,
        tags=_EVENTS,
        description="The fields given change (`events: null` means every type); "
        "`enabled: false` stops new deliveries until it is enabled again. "
        "A deleted endpoint is 404.",
        path_params=_ENDPOINT,
    ),
    Route(
        "POST",
        "/api/v1/webhook-endpoints/{endpoint_id}/rotate-secret",
        rotate_webhook_secret,
        "Rotate a webhook endpoint's signing secret",
        body=RotateWebhookSecretRequest,
        response=WebhookEndpointRecord,
        tags=_EVENTS,
        description="The answer's `secret` is the new one, shown this once. For "
        "`overlap_seconds` (default 86400, at most 604800; business time) deliveries carry "
        "both signatures in `webhook-signature`, the new one first.",
        path_params=_ENDPOINT,
        replay=_replay_endpoint,
    ),
)
