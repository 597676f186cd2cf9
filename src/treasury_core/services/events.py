"""The one factory of the services' events: an id, business time, and the resource's payload.

The services never render a resource: the composition root (:func:`treasury_core.bootstrap`)
gives the factory its ``payload``, the interface's projection of an entity
(:func:`treasury_core.interface.projections.event_object`), so an event written in a service's
transaction carries exactly what the API returns of the resource.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from treasury_core.notifications.events import Event, EventType
from treasury_core.ports import Clock, IdSource


class Announced(Protocol):
    """A resource events are about: it belongs to a company."""

    @property
    def company_id(self) -> int:
        """The company the event goes to."""
        ...


#: An entity's ``data.object``: a JSON-ready dict.
Payload = Callable[[Any], dict[str, Any]]


class EventFactory:
    """Builds the events the services write to the outbox."""

    def __init__(self, ids: IdSource, clock: Clock, payload: Payload) -> None:
        self._ids = ids
        self._clock = clock
        self._payload = payload

    def event(self, type_: EventType, resource: Announced) -> Event:
        """The event ``type_`` about ``resource``, stamped now, not yet written."""
        return Event(
            id=self._ids.new_id("evt"),
            type=type_,
            company_id=resource.company_id,
            created_at=self._clock.now(),
            data={"object": self._payload(resource)},
        )
