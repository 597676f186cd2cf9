"""Managing a webhook endpoint after its creation: update it, and rotate its signing secret.

Kept beside :class:`~treasury_core.services.notifications.service.NotificationService` (which
creates,
lists and deletes endpoints and signs deliveries) so that module stays about the pipeline.

A rotation draws a new salt, so the vault derives a new secret, and keeps the old salt until
``previous_secret_expires_at`` (business time): the delivery pipeline then signs each
delivery under both secrets (``WebhookEndpoint.signing_salts``), and Standard Webhooks
receivers accept a ``webhook-signature`` holding several space-separated ``v1,`` signatures
when any one of them verifies. No secret is stored either way; only salts are.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.notifications.endpoints import (
    RotateWebhookSecretRequest,
    UpdateWebhookEndpointRequest,
    WebhookEndpoint,
    destination_refusal,
)
from treasury_core.ports import UnitOfWork
from treasury_core.services.idempotency import finish
from treasury_core.services.notifications.service import CreatedEndpoint, NotificationService
from treasury_core.validation import is_resource_id


def _locked(uow: UnitOfWork, company_id: int, endpoint_id: str) -> WebhookEndpoint:
    """The company's endpoint, locked; a deleted one is gone (:class:`NotFound`)."""
    found = None
    if is_resource_id(endpoint_id, WebhookEndpoint.prefix):
        found = uow.records.get(WebhookEndpoint, endpoint_id, company_id, for_update=True)
    if found is None or found.status == "deleted":
        raise NotFound(f"No such webhook endpoint: {endpoint_id}")
    return found


async def update_endpoint(
    service: NotificationService,
    company_id: int,
    endpoint_id: str,
    request: UpdateWebhookEndpointRequest,
    *,
    idempotency: IdempotencyTicket[WebhookEndpoint] | None = None,
) -> WebhookEndpoint:
    """Change the fields ``request`` sets (``url``, ``events``, ``enabled``; a ``null`` ``url``
    or ``enabled`` leaves it as it is); the endpoint as stored. Deliveries already made keep
    the URL they were made for."""
    ctx = service._adapters
    given = request.model_fields_set
    if request.url is not None:
        refusal = destination_refusal(
            urlsplit(request.url).hostname or "",
            allow_private=ctx.config.private_destinations_allowed,
        )
        if refusal is not None:
            raise ValidationFailed(f"url is refused: {refusal}", param="url")

    def write(uow: UnitOfWork) -> WebhookEndpoint:
        found = _locked(uow, company_id, endpoint_id)
        changes: dict[str, object] = {}
        if request.url is not None:
            changes["url"] = request.url
        if "events" in given:
            changes["events"] = tuple(request.events) if request.events is not None else None
        if request.enabled is not None:
            changes["status"] = "enabled" if request.enabled else "disabled"
        updated = found.model_copy(update=changes)
        uow.records.update(updated)
        return finish(uow, idempotency, updated)

    return await ctx.storage.run(write)


async def rotate_secret(
    service: NotificationService,
    company_id: int,
    endpoint_id: str,
    request: RotateWebhookSecretRequest,
    *,
    idempotency: IdempotencyTicket[CreatedEndpoint] | None = None,
) -> CreatedEndpoint:
    """Give the endpoint a new secret (answered this once); the old one keeps signing beside
    it for ``request.overlap_seconds`` of business time."""
    ctx = service._adapters
    now = ctx.clock.now()
    salt = ctx.ids.new_id("salt")

    def write(uow: UnitOfWork) -> CreatedEndpoint:
        found = _locked(uow, company_id, endpoint_id)
        overlap = request.overlap_seconds
        rotated = found.model_copy(
            update={
                "secret_salt": salt,
                "previous_salt": found.secret_salt if overlap else None,
                "previous_secret_expires_at": now + timedelta(seconds=overlap) if overlap else None,
            }
        )
        uow.records.update(rotated)
        return finish(uow, idempotency, CreatedEndpoint(rotated, service.endpoint_secret(rotated)))

    return await ctx.storage.run(write)
