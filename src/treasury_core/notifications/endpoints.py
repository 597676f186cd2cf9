"""Webhook endpoints: where a company's events are posted, and which types it takes.

Rules:
- ``url`` is ``http(s)://host[:port]/…`` without credentials; an address written as a loopback,
  private or link-local IP is refused unless configuration allows such destinations (the
  sandbox does); names are checked when a delivery connects.
- ``events`` is a list of event types, or ``null`` for all of them.
- The signing secret (``whsec_…``, Standard Webhooks) is derived by the vault from the
  endpoint's id and a random salt: it is shown in the creation response, and nothing stored is
  enough to rebuild it.
- Deleting an endpoint stops new deliveries to it; those already pending still go. Disabling
  one (``enabled: false``) does the same, and enabling it again resumes them.
- Rotating the secret derives a new one from a new salt; until ``previous_secret_expires_at``
  (business time) deliveries carry both signatures, the new one first, so a receiver can
  switch to the new secret whenever it likes within the window.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime
from typing import Annotated, ClassVar
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, WithJsonSchema

from treasury_core.metadata import MetadataField
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.events import OPERATOR_EVENTS, EventType
from treasury_core.serialization import Timestamp
from treasury_core.validation import SchemaComponent, StrictRequest, Url


def _no_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not contain credentials")
    if not parts.hostname:
        raise ValueError("must name a host")
    return url


_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+", re.IGNORECASE)


def destination_refusal(host: str, *, allow_private: bool) -> str | None:
    """Why a delivery must not go to ``host``, or ``None``.

    A host written with only numeric labels that is not a canonical IP address (``2130706433``,
    ``127.1``, ``0x7f.1``) is refused: resolvers read those as addresses, and checking them by
    another reading than the connection's would let a private address through. Unless
    ``allow_private``, an IP address that is not publicly routable is refused too (names are
    checked on the addresses they resolve to, when the delivery connects).
    """
    bare = host.strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        labels = bare.rstrip(".").split(".")
        if all(_NUMERIC_LABEL.fullmatch(label) for label in labels):
            return f"{host} is not a host name or a canonical IP address"
        return None
    if not allow_private and not address.is_global:
        return f"{host} is not a public address"
    return None


#: A destination URL: http(s), a host, no credentials.
DestinationUrl = Annotated[Url, AfterValidator(_no_credentials)]


def _a_companys_event(event_type: EventType) -> EventType:
    # The operator's events go to no company: subscribing to one would wait for nothing.
    if event_type in OPERATOR_EVENTS:
        raise ValueError(f"{event_type.value} is the operator's event; no company receives it")
    return event_type


#: An event type a company's endpoint can subscribe to (not strict: types arrive as strings);
#: the documented schema lists only those.
SubscribableEvent = Annotated[
    EventType,
    Field(strict=False),
    AfterValidator(_a_companys_event),
    WithJsonSchema(
        {"type": "string", "enum": [t.value for t in EventType if t not in OPERATOR_EVENTS]}
    ),
    SchemaComponent("SubscribableEventType"),
]


class CreateWebhookEndpointRequest(StrictRequest):
    """``POST /api/v1/webhook-endpoints``."""

    url: DestinationUrl
    events: Annotated[list[SubscribableEvent], Field(min_length=1)] | None = None


#: The longest overlap a rotation may ask for (a week), and the one it gets by default (a day).
MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 3600
DEFAULT_ROTATION_OVERLAP_SECONDS = 24 * 3600


class UpdateWebhookEndpointRequest(StrictRequest):
    """``POST /api/v1/webhook-endpoints/{id}``: the fields given change, the others stay.

    ``events`` ``null`` means every type, as on create; ``url`` or ``enabled`` ``null`` is as
    if left out.
    """

    url: DestinationUrl | None = None
    events: Annotated[list[SubscribableEvent], Field(min_length=1)] | None = None
    enabled: bool | None = None


class RotateWebhookSecretRequest(StrictRequest):
    """``POST /api/v1/webhook-endpoints/{id}/rotate-secret``."""

    #: How long the old secret still signs deliveries beside the new one; 0 drops it at once.
    overlap_seconds: Annotated[int, Field(ge=0, le=MAX_ROTATION_OVERLAP_SECONDS)] = (
        DEFAULT_ROTATION_OVERLAP_SECONDS
    )


class WebhookEndpoint(TreasuryRecord):
    """A stored webhook endpoint: where events go and the salt its secret is derived with."""

    prefix: ClassVar[str] = "we"

    id: str
    company_id: int
    created_at: Timestamp
    metadata: MetadataField = Field(default_factory=dict)
    url: str
    events: tuple[EventType, ...] | None = None
    status: str = "enabled"
    secret_salt: str
    #: The salt of the secret the last rotation replaced, and until when it still signs.
    previous_salt: str | None = None
    previous_secret_expires_at: datetime | None = None

    def takes(self, event_type: EventType) -> bool:
        """Whether this endpoint gets events of ``event_type``."""
        return self.status == "enabled" and (self.events is None or event_type in self.events)

    def signing_salts(self, now: datetime) -> tuple[str, ...]:
        """The salts of the secrets that sign a delivery at business time ``now``: the current
        one first, then the one the last rotation replaced while its overlap lasts."""
        until = self.previous_secret_expires_at
        if self.previous_salt is None or until is None or now >= until:
            return (self.secret_salt,)
        return (self.secret_salt, self.previous_salt)
