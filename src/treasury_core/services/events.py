"""The one factory of the services' events: an id, business time, and the resource's payload.

The services never render a resource: the composition root (:func:`treasury_core.bootstrap`)
gives the factory its ``payload``, the interface's projection of an entity
(:func:`treasury_core.interface.projections.event_object`), so an event written in a service's
transaction carries exactly what the API returns of the resource.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.events import Event, EventType
from treasury_core.ports import Clock, IdSource, UnitOfWork


class Announced(Protocol):
    """A resource events are about: it belongs to a company."""

    @property
    def company_id(self) -> int:
        """The company the event goes to."""
        ...


#: An entity's ``data.object``: a JSON-ready dict.
Payload = Callable[[Any], dict[str, Any]]


class EventFactory:
    """Builds the events the services write to the outbox, and writes them."""

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

    def write(self, uow: UnitOfWork, type_: EventType, resource: Announced) -> None:
        """Write the event ``type_`` about ``resource`` to the outbox, in the caller's
        transaction."""
        uow.outbox.add(self.event(type_, resource))

    def add_announced(self, uow: UnitOfWork, record: TreasuryRecord, type_: EventType) -> None:
        """Store the new ``record`` and its event ``type_``, in the caller's transaction (one
        statement where the storage can: ``RecordRepository.add``)."""
        uow.records.add(record, self.event(type_, record))
