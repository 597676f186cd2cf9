"""Endpoints of part 6 and decisions.md "Events and delivery": webhook endpoints, the events
API, redelivery, and the secret that signs the legacy and PMTI callbacks. All need a secret key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, StringConstraints

from treasury_aiohttp.io import (
    Responder,
    json_bytes,
    json_response,
    list_response,
    page_request,
    parse_body,
    principal,
    timestamp_query,
    treasury,
)
from treasury_aiohttp.routing import Param, Route
from treasury_core.errors import ValidationFailed
from treasury_core.interface.records import WebhookEndpointRecord
from treasury_core.notifications.deliveries import Delivery
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.notifications.events import Event, EventType
from treasury_core.serialization import Timestamp
from treasury_core.services.notifications.endpoints import CreatedEndpoint
from treasury_core.validation import id_pattern


class EventRecord(BaseModel):
    """An event as the events API shows it: the webhook body, plus ``object``."""

    id: str
    object: Literal["event"] = "event"
    type: str
    created: Timestamp
    data: dict[str, Any]


class DeliveryRecord(BaseModel):
    """A delivery of an event, with its attempts (the body it sends is left out)."""

    id: str
    object: Literal["delivery"] = "delivery"
    event_id: str
    kind: str
    endpoint_id: str | None
    url: str
    status: str
    attempts: list[dict[str, Any]]
    next_attempt_at: Timestamp


class CallbackSecretRecord(BaseModel):
    """``GET /api/v1/callback-secret``: what the legacy and PMTI callbacks are signed with."""

    secret: str


def _event_record(event: Event) -> EventRecord:
    return EventRecord(
        id=event.id, type=event.type.value, created=event.created_at, data=event.data
    )


def _delivery_record(delivery: Delivery) -> DeliveryRecord:
    return DeliveryRecord(
        id=delivery.id,
        event_id=delivery.event_id,
        kind=delivery.kind.value,
        endpoint_id=delivery.endpoint_id,
        url=delivery.url,
        status=delivery.status.value,
        attempts=[a.model_dump(mode="json") for a in delivery.attempts],
        next_attempt_at=delivery.next_attempt_at,
    )


async def create_endpoint(request: web.Request) -> web.StreamResponse:
    """Register a webhook endpoint; the answer carries its signing secret, this once."""
    body = await parse_body(request, CreateWebhookEndpointRequest)
    # The stored copy (for idempotent replays) leaves the secret out; a replay derives it again.
    responder: Responder[CreatedEndpoint] = Responder(
        request,
        lambda created: WebhookEndpointRecord.of(created.endpoint, secret=created.secret),
        render_stored=lambda created: WebhookEndpointRecord.of(created.endpoint),
    )
    created = await treasury(request).notifications.create_endpoint(
        principal(request).company_id, body, idempotency=responder.ticket()
    )
    return responder.respond(created)


async def _replay_endpoint(request: web.Request, stored: bytes) -> bytes:
    record = WebhookEndpointRecord.model_validate_json(stored)
    service = treasury(request).notifications
    endpoint = await service.endpoint(principal(request).company_id, record.id)
    return json_bytes(record.model_copy(update={"secret": service.endpoint_secret(endpoint)}))


async def list_endpoints(request: web.Request) -> web.StreamResponse:
    """The company's webhook endpoints, newest first."""
    endpoints = await treasury(request).notifications.endpoints(principal(request).company_id)
    return web.json_response(
        [WebhookEndpointRecord.of(e).model_dump(mode="json") for e in endpoints]
    )


async def delete_endpoint(request: web.Request) -> web.StreamResponse:
    """Stop sending to an endpoint; answers it, ``status`` ``deleted``."""
    deleted = await treasury(request).notifications.delete_endpoint(
        principal(request).company_id, request.match_info["endpoint_id"]
    )
    return json_response(WebhookEndpointRecord.of(deleted))


async def list_events(request: web.Request) -> web.StreamResponse:
    """The company's events of the last 30 days (configurable), newest first."""
    paging = page_request(request)
    page = await treasury(request).notifications.events(
        principal(request).company_id,
        type_=request.query.get("type"),
        created_gte=timestamp_query(request, "created_gte"),
        limit=paging.limit,
        starting_after=paging.starting_after,
    )
    records = [_event_record(e) for e in page.items]
    return list_response(request, records, page, EventRecord, lambda e: e.id)


async def get_event(request: web.Request) -> web.StreamResponse:
    """One event."""
    event = await treasury(request).notifications.event(
        principal(request).company_id, request.match_info["event_id"]
    )
    return json_response(_event_record(event))


async def event_deliveries(request: web.Request) -> web.StreamResponse:
    """An event's deliveries and their attempts (status code, duration, error)."""
    deliveries = await treasury(request).notifications.deliveries_of(
        principal(request).company_id, request.match_info["event_id"]
    )
    return web.json_response([_delivery_record(d).model_dump(mode="json") for d in deliveries])


async def redeliver_event(request: web.Request) -> web.StreamResponse:
    """Send an event again to its destinations as they are now; answers the new deliveries."""
    if await request.read():
        raise ValidationFailed("This call takes no body", code="body_invalid")
    made = await treasury(request).notifications.redeliver(
        principal(request).company_id, request.match_info["event_id"]
    )
    return web.json_response([_delivery_record(d).model_dump(mode="json") for d in made])


async def callback_secret(request: web.Request) -> web.StreamResponse:
    """The secret the company's legacy and PMTI callbacks are signed with."""
    secret = treasury(request).notifications.callback_secret(principal(request).company_id)
    return json_response(CallbackSecretRecord(secret=secret))


_EVENTS = ("Events and webhooks",)
_EVENT_ID = {"event_id": "The event's id (`evt_…`)."}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/webhook-endpoints",
        create_endpoint,
        "Register a webhook endpoint",
        body=CreateWebhookEndpointRequest,
        response=WebhookEndpointRecord,
        tags=_EVENTS,
        description="`events` filters by type (all when absent). The answer's `secret` "
        "(`whsec_…`) signs the deliveries (Standard Webhooks); it is shown this once.",
        replay=_replay_endpoint,
    ),
    Route(
        "GET",
        "/api/v1/webhook-endpoints",
        list_endpoints,
        "List webhook endpoints",
        response=WebhookEndpointRecord,
        is_list=True,
        paged=False,
        tags=_EVENTS,
    ),
    Route(
        "DELETE",
        "/api/v1/webhook-endpoints/{endpoint_id}",
        delete_endpoint,
        "Delete a webhook endpoint",
        response=WebhookEndpointRecord,
        tags=_EVENTS,
        path_params={"endpoint_id": "The endpoint's id (`we_…`)."},
    ),
    Route(
        "GET",
        "/api/v1/events",
        list_events,
        "List events",
        response=EventRecord,
        is_list=True,
        tags=_EVENTS,
        query_params={
            "type": Param("Only events of this type.", EventType),
            "created_gte": Param(
                "Only events created at or after this ISO 8601 timestamp.", datetime
            ),
        },
        cursor=Annotated[str, StringConstraints(pattern=id_pattern("evt"))],
    ),
    Route(
        "GET",
        "/api/v1/events/{event_id}",
        get_event,
        "Get an event",
        response=EventRecord,
        tags=_EVENTS,
        path_params=_EVENT_ID,
    ),
    Route(
        "GET",
        "/api/v1/events/{event_id}/deliveries",
        event_deliveries,
        "List an event's deliveries and their attempts",
        response=DeliveryRecord,
        is_list=True,
        paged=False,
        tags=_EVENTS,
        path_params=_EVENT_ID,
    ),
    Route(
        "POST",
        "/api/v1/events/{event_id}/redeliver",
        redeliver_event,
        "Deliver an event again",
        response=DeliveryRecord,
        is_list=True,
        paged=False,
        tags=_EVENTS,
        path_params=_EVENT_ID,
    ),
    Route(
        "GET",
        "/api/v1/callback-secret",
        callback_secret,
        "The secret the legacy and PMTI callbacks are signed with",
        response=CallbackSecretRecord,
        tags=_EVENTS,
    ),
)
