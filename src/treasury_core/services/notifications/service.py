"""Notifications: the outbox dispatcher, webhook endpoints and the events API, behind one face.

:class:`NotificationService` delegates to its three parts: :class:`~treasury_core.services.
notifications.dispatcher.Dispatcher` (fan-out and delivery, documented there),
:class:`~treasury_core.services.notifications.endpoints.WebhookEndpoints` and
:class:`~treasury_core.services.notifications.events_api.EventsApi`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from treasury_core.config import TreasuryConfig
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.notifications.deliveries import Delivery
from treasury_core.notifications.endpoints import (
    CreateWebhookEndpointRequest,
    RotateWebhookSecretRequest,
    UpdateWebhookEndpointRequest,
    WebhookEndpoint,
)
from treasury_core.notifications.events import Event
from treasury_core.notifications.status import PipelineStatus
from treasury_core.pagination import DEFAULT_LIMIT, Page
from treasury_core.ports import Clock, IdSource, Storage, Vault, WebhookSender
from treasury_core.services.notifications.dispatcher import (
    RATE_WINDOW_SECONDS,
    TOKENIZATION_EVENTS,
    Dispatcher,
    webhook_payload,
)
from treasury_core.services.notifications.endpoints import (
    CreatedEndpoint,
    WebhookEndpoints,
    WebhookSecrets,
)
from treasury_core.services.notifications.events_api import EventsApi

__all__ = [
    "RATE_WINDOW_SECONDS",
    "TOKENIZATION_EVENTS",
    "CreatedEndpoint",
    "NotificationService",
    "webhook_payload",
]


class NotificationService:
    """Webhook endpoints, the outbox dispatcher and the events API.

    ``clock`` is business time (retries, retention, rotation overlaps); ``wall_clock`` real
    time (leases, ``webhook-timestamp``). ``config`` gives the delivery settings, the event
    retention and whether endpoints may name private hosts.
    """

    def __init__(
        self,
        *,
        storage: Storage,
        clock: Clock,
        ids: IdSource,
        config: TreasuryConfig,
        vault: Vault,
        wall_clock: Clock,
        subscribers: Callable[[], Sequence[tuple[str, Callable[..., Any]]]] | None = None,
        sender: WebhookSender | None = None,
    ) -> None:
        secrets = WebhookSecrets(vault=vault)
        self._secrets = secrets
        self.webhook_endpoints = WebhookEndpoints(
            storage=storage,
            clock=clock,
            ids=ids,
            secrets=secrets,
            private_destinations_allowed=config.private_destinations_allowed,
        )
        self.dispatcher = Dispatcher(
            storage=storage,
            clock=clock,
            ids=ids,
            wall_clock=wall_clock,
            secrets=secrets,
            config=config,
            subscribers=subscribers,
            sender=sender,
        )
        self.events_api = EventsApi(
            storage=storage,
            clock=clock,
            dispatcher=self.dispatcher,
            retention_days=config.event_retention_days,
        )

    # --- the dispatcher's settings ------------------------------------------------------------

    @property
    def sender(self) -> WebhookSender | None:
        """What carries webhooks and callbacks (``None``: deliveries wait in storage)."""
        return self.dispatcher.sender

    @sender.setter
    def sender(self, sender: WebhookSender | None) -> None:
        self.dispatcher.sender = sender

    @property
    def lease(self) -> timedelta:
        """How long a worker holds a claimed delivery (real time)."""
        return self.dispatcher.lease

    # --- secrets ------------------------------------------------------------------------------

    def endpoint_secret(self, endpoint: WebhookEndpoint, salt: str | None = None) -> str:
        """The endpoint's signing secret (``whsec_…``); of an earlier ``salt`` if given."""
        return self._secrets.endpoint_secret(endpoint, salt)

    def callback_secret(self, company_id: int) -> str:
        """The secret the company's legacy and PMTI callbacks are signed with (``whsec_…``)."""
        return self._secrets.callback_secret(company_id)

    # --- webhook endpoints --------------------------------------------------------------------

    async def create_endpoint(
        self,
        company_id: int,
        request: CreateWebhookEndpointRequest,
        *,
        idempotency: IdempotencyTicket[CreatedEndpoint] | None = None,
    ) -> CreatedEndpoint:
        """A new endpoint taking ``request.events`` (all types when ``None``)."""
        return await self.webhook_endpoints.create(company_id, request, idempotency=idempotency)

    async def endpoints(self, company_id: int) -> list[WebhookEndpoint]:
        """The company's endpoints, newest first (deleted ones left out, disabled ones in)."""
        return await self.webhook_endpoints.list(company_id)

    async def endpoint(self, company_id: int, endpoint_id: str) -> WebhookEndpoint:
        """One of the company's endpoints (deleted ones too), or ``NotFound``."""
        return await self.webhook_endpoints.get(company_id, endpoint_id)

    async def delete_endpoint(self, company_id: int, endpoint_id: str) -> WebhookEndpoint:
        """Stop sending to the endpoint (deliveries already pending still go)."""
        return await self.webhook_endpoints.delete(company_id, endpoint_id)

    async def update_endpoint(
        self,
        company_id: int,
        endpoint_id: str,
        request: UpdateWebhookEndpointRequest,
        *,
        idempotency: IdempotencyTicket[WebhookEndpoint] | None = None,
    ) -> WebhookEndpoint:
        """Change the fields ``request`` sets (see :meth:`WebhookEndpoints.update`)."""
        return await self.webhook_endpoints.update(
            company_id, endpoint_id, request, idempotency=idempotency
        )

    async def rotate_secret(
        self,
        company_id: int,
        endpoint_id: str,
        request: RotateWebhookSecretRequest,
        *,
        idempotency: IdempotencyTicket[CreatedEndpoint] | None = None,
    ) -> CreatedEndpoint:
        """Give the endpoint a new secret (see :meth:`WebhookEndpoints.rotate_secret`)."""
        return await self.webhook_endpoints.rotate_secret(
            company_id, endpoint_id, request, idempotency=idempotency
        )

    # --- fan-out and delivery -----------------------------------------------------------------

    async def dispatch(self, limit: int = 500) -> int:
        """Fan out up to ``limit`` undispatched events into deliveries; how many."""
        return await self.dispatcher.dispatch(limit)

    def wake(self) -> None:
        """Say that events were committed: the worker loop fans them out now (thread-safe)."""
        self.dispatcher.wake()

    def wake_deliveries(self) -> None:
        """Say that deliveries are due: the delivery loop claims them now (thread-safe)."""
        self.dispatcher.wake_deliveries()

    async def wait_for_events(self, stop: asyncio.Event, seconds: float) -> None:
        """Wait until :meth:`wake` is called, ``stop`` is set or ``seconds`` pass."""
        await self.dispatcher.wait_for_events(stop, seconds)

    async def deliver_due(self, limit: int | None = None) -> int:
        """Claim, send and record one batch of due deliveries; how many were claimed."""
        return await self.dispatcher.deliver_due(limit)

    async def keep_delivering(self, stop: asyncio.Event) -> None:
        """The delivery loop of a worker, until ``stop`` is set
        (:meth:`Dispatcher.keep_delivering`)."""
        await self.dispatcher.keep_delivering(stop)

    async def finish_in_flight(self) -> None:
        """Wait until the batches the delivery loop started on this event loop are recorded."""
        await self.dispatcher.finish_in_flight()

    async def run_due(
        self, batch: int = 500, *, stopping: Callable[[], bool] = lambda: False
    ) -> None:
        """Fan out every undispatched event, then send every due delivery
        (:meth:`Dispatcher.run_due`), holding :meth:`exclusive`."""
        async with self.exclusive():
            await self.dispatcher.run_due_exclusively(batch, stopping=stopping)

    def exclusive(self) -> asyncio.Lock:
        """The lock a pass over due deliveries holds, for this event loop
        (:meth:`Dispatcher.exclusive`)."""
        return self.dispatcher.exclusive()

    async def dispatch_all(
        self, batch: int = 500, *, stopping: Callable[[], bool] = lambda: False
    ) -> None:
        """Fan out every undispatched event (``stopping`` asked between batches)."""
        await self.dispatcher.dispatch_all(batch, stopping=stopping)

    async def run_due_exclusively(
        self, batch: int = 500, *, stopping: Callable[[], bool] = lambda: False
    ) -> None:
        """:meth:`run_due` for a caller already holding :meth:`exclusive`."""
        await self.dispatcher.run_due_exclusively(batch, stopping=stopping)

    async def status(self) -> PipelineStatus:
        """The pipeline's backlog, delivery rate and failing endpoints
        (:meth:`Dispatcher.status`)."""
        return await self.dispatcher.status()

    # --- the events API -----------------------------------------------------------------------

    async def purge_expired(self) -> int:
        """Forget events past the retention window (and their finished deliveries)."""
        return await self.events_api.purge_expired()

    async def events(
        self,
        company_id: int,
        *,
        type_: str | None = None,
        created_gte: datetime | None = None,
        limit: int = DEFAULT_LIMIT,
        starting_after: str | None = None,
    ) -> Page[Event]:
        """The company's events of the retention window, newest first
        (:meth:`EventsApi.events`)."""
        return await self.events_api.events(
            company_id,
            type_=type_,
            created_gte=created_gte,
            limit=limit,
            starting_after=starting_after,
        )

    async def event(self, company_id: int, event_id: str) -> Event:
        """One of the company's events (within the retention window), or ``NotFound``."""
        return await self.events_api.event(company_id, event_id)

    async def redeliver(self, company_id: int, event_id: str) -> list[Delivery]:
        """Send the event again to its destinations as they are now; the new deliveries."""
        return await self.events_api.redeliver(company_id, event_id)

    async def deliveries_of(self, company_id: int, event_id: str) -> list[Delivery]:
        """The deliveries of one of the company's events, oldest first."""
        return await self.events_api.deliveries_of(company_id, event_id)
