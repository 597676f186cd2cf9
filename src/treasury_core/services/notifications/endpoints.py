"""Webhook endpoints: create, list, read, update and delete them; their signing secrets.

A rotation draws a new salt, so the vault derives a new secret, and keeps the old salt until
``previous_secret_expires_at`` (business time): the delivery pipeline then signs each
delivery under both secrets (``WebhookEndpoint.signing_salts``), and Standard Webhooks
receivers accept a ``webhook-signature`` holding several space-separated ``v1,`` signatures
when any one of them verifies. No secret is stored either way; only salts are.
"""

from __future__ import annotations

import base64
import builtins
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol
from urllib.parse import urlsplit

from treasury_core.errors import NotFound, ValidationFailed
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.notifications.endpoints import (
    CreateWebhookEndpointRequest,
    RotateWebhookSecretRequest,
    UpdateWebhookEndpointRequest,
    WebhookEndpoint,
    destination_refusal,
)
from treasury_core.pagination import MAX_LIMIT
from treasury_core.ports import Clock, IdSource, Storage, UnitOfWork, Vault
from treasury_core.services.idempotency import finish
from treasury_core.validation import is_resource_id


@dataclass(frozen=True, slots=True)
class CreatedEndpoint:
    """A new webhook endpoint and its signing secret (shown once)."""

    endpoint: WebhookEndpoint
    secret: str


def _whsec(derived: str) -> str:
    # Standard Webhooks secrets are ``whsec_`` and standard base64 of the key bytes.
    raw = base64.urlsafe_b64decode(derived + "=" * (-len(derived) % 4))
    return "whsec_" + base64.b64encode(raw).decode()


class WebhookSecrets:
    """The secrets deliveries are signed with, derived by the vault and never stored."""

    def __init__(self, *, vault: Vault) -> None:
        self._vault = vault

    def endpoint_secret(self, endpoint: WebhookEndpoint, salt: str | None = None) -> str:
        """The endpoint's signing secret (``whsec_…``); of an earlier ``salt`` if given."""
        salt = endpoint.secret_salt if salt is None else salt
        return _whsec(self._vault.derive_secret("webhook-endpoint", f"{endpoint.id}:{salt}"))

    def callback_secret(self, company_id: int) -> str:
        """The secret the company's legacy and PMTI callbacks are signed with (``whsec_…``)."""
        return _whsec(self._vault.derive_secret("callbacks", str(company_id)))


def all_endpoints(uow: UnitOfWork, company_id: int) -> list[WebhookEndpoint]:
    """Every endpoint of the company but the deleted ones, newest first, in ``uow``."""
    found: list[WebhookEndpoint] = []
    after = None
    while True:
        page = uow.records.list(WebhookEndpoint, company_id, MAX_LIMIT, after)
        found += [e for e in page if e.status != "deleted"]
        if len(page) < MAX_LIMIT:
            return found
        after = page[-1].id


def _locked(uow: UnitOfWork, company_id: int, endpoint_id: str) -> WebhookEndpoint:
    """The company's endpoint, locked; a deleted one is gone (:class:`NotFound`)."""
    found = None
    if is_resource_id(endpoint_id, WebhookEndpoint.prefix):
        found = uow.records.get(WebhookEndpoint, endpoint_id, company_id, for_update=True)
    if found is None or found.status == "deleted":
        raise NotFound(f"No such webhook endpoint: {endpoint_id}")
    return found


class WebhookEndpoints:
    """A company's webhook endpoints.

    ``private_destinations_allowed``: whether a URL may name a private or loopback host (the
    configuration's setting).
    """

    def __init__(
        self,
        *,
        storage: Storage,
        clock: Clock,
        ids: IdSource,
        secrets: WebhookSecrets,
        private_destinations_allowed: bool,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._ids = ids
        self._secrets = secrets
        self._private_allowed = private_destinations_allowed

    def _check_url(self, url: str) -> None:
        refusal = destination_refusal(
            urlsplit(url).hostname or "", allow_private=self._private_allowed
        )
        if refusal is not None:
            raise ValidationFailed(f"url is refused: {refusal}", param="url")

    async def create(
        self,
        company_id: int,
        request: CreateWebhookEndpointRequest,
        *,
        idempotency: IdempotencyTicket[CreatedEndpoint] | None = None,
    ) -> CreatedEndpoint:
        """A new endpoint taking ``request.events`` (all types when ``None``)."""
        self._check_url(request.url)
        endpoint = WebhookEndpoint(
            id=self._ids.new_id(WebhookEndpoint.prefix),
            company_id=company_id,
            url=request.url,
            events=tuple(request.events) if request.events is not None else None,
            created_at=self._clock.now(),
            secret_salt=self._ids.new_id("salt"),
        )
        created = CreatedEndpoint(endpoint, self._secrets.endpoint_secret(endpoint))

        def write(uow: UnitOfWork) -> CreatedEndpoint:
            uow.records.add(endpoint)
            return finish(uow, idempotency, created)

        return await self._storage.run(write)

    async def list(self, company_id: int) -> builtins.list[WebhookEndpoint]:
        """The company's endpoints, newest first (deleted ones left out, disabled ones in)."""
        return await self._storage.run(lambda uow: all_endpoints(uow, company_id), write=False)

    async def get(self, company_id: int, endpoint_id: str) -> WebhookEndpoint:
        """One of the company's endpoints (deleted ones too), or :class:`NotFound`."""
        found = None
        if is_resource_id(endpoint_id, WebhookEndpoint.prefix):
            found = await self._storage.run(
                lambda uow: uow.records.get(WebhookEndpoint, endpoint_id, company_id),
                write=False,
            )
        if found is None:
            raise NotFound(f"No such webhook endpoint: {endpoint_id}")
        return found

    async def delete(self, company_id: int, endpoint_id: str) -> WebhookEndpoint:
        """Stop sending to the endpoint (deliveries already pending still go)."""

        def write(uow: UnitOfWork) -> WebhookEndpoint:
            found = None
            if is_resource_id(endpoint_id, WebhookEndpoint.prefix):
                found = uow.records.get(WebhookEndpoint, endpoint_id, company_id, for_update=True)
            if found is None or found.status == "deleted":
                raise NotFound(f"No such webhook endpoint: {endpoint_id}")
            deleted = found.model_copy(update={"status": "deleted"})
            uow.records.update(deleted)
            return deleted

        return await self._storage.run(write)

    async def update(
        self,
        company_id: int,
        endpoint_id: str,
        request: UpdateWebhookEndpointRequest,
        *,
        idempotency: IdempotencyTicket[WebhookEndpoint] | None = None,
    ) -> WebhookEndpoint:
        """Change the fields ``request`` sets (``url``, ``events``, ``enabled``; a ``null``
        ``url`` or ``enabled`` leaves it as it is); the endpoint as stored. Deliveries already
        made keep the URL they were made for."""
        given = request.model_fields_set
        if request.url is not None:
            self._check_url(request.url)

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

        return await self._storage.run(write)

    async def rotate_secret(
        self,
        company_id: int,
        endpoint_id: str,
        request: RotateWebhookSecretRequest,
        *,
        idempotency: IdempotencyTicket[CreatedEndpoint] | None = None,
    ) -> CreatedEndpoint:
        """Give the endpoint a new secret (answered this once); the old one keeps signing
        beside it for ``request.overlap_seconds`` of business time."""
        now = self._clock.now()
        salt = self._ids.new_id("salt")
        secrets = self._secrets

        def write(uow: UnitOfWork) -> CreatedEndpoint:
            found = _locked(uow, company_id, endpoint_id)
            overlap = request.overlap_seconds
            rotated = found.model_copy(
                update={
                    "secret_salt": salt,
                    "previous_salt": found.secret_salt if overlap else None,
                    "previous_secret_expires_at": (
                        now + timedelta(seconds=overlap) if overlap else None
                    ),
                }
            )
            uow.records.update(rotated)
            created = CreatedEndpoint(rotated, secrets.endpoint_secret(rotated))
            return finish(uow, idempotency, created)

        return await self._storage.run(write)


class HoldsEndpoints(Protocol):
    """What holds a treasury's webhook endpoints (the notification service)."""

    @property
    def webhook_endpoints(self) -> WebhookEndpoints:
        """The endpoints."""
        ...


async def update_endpoint(
    service: HoldsEndpoints,
    company_id: int,
    endpoint_id: str,
    request: UpdateWebhookEndpointRequest,
    *,
    idempotency: IdempotencyTicket[WebhookEndpoint] | None = None,
) -> WebhookEndpoint:
    """:meth:`WebhookEndpoints.update` of ``service``'s endpoints."""
    return await service.webhook_endpoints.update(
        company_id, endpoint_id, request, idempotency=idempotency
    )


async def rotate_secret(
    service: HoldsEndpoints,
    company_id: int,
    endpoint_id: str,
    request: RotateWebhookSecretRequest,
    *,
    idempotency: IdempotencyTicket[CreatedEndpoint] | None = None,
) -> CreatedEndpoint:
    """:meth:`WebhookEndpoints.rotate_secret` of ``service``'s endpoints."""
    return await service.webhook_endpoints.rotate_secret(
        company_id, endpoint_id, request, idempotency=idempotency
    )
