"""The outbox: events written in the business transaction, and the dispatcher's reads of them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic_core import from_json, to_json
from sqlalchemy import Connection, Row, delete, func, select, update

from treasury_core.notifications.deliveries import DeliveryStatus
from treasury_core.notifications.events import Event, EventHead, EventType
from treasury_core.notifications.status import OutboxBacklog
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.hot import HotInsert

_Events = list[Event]  # spelled here: inside the outbox classes, ``list`` is a method
_EventHeads = list[EventHead]

# An event is written undispatched: ``dispatched_at`` stays NULL until the dispatcher sets it.
INSERT_EVENT = HotInsert(t.events, omit=("dispatched_at",))


def event_values(event: Event) -> dict[str, Any]:
    """The row :data:`INSERT_EVENT` writes for ``event``."""
    return {
        "id": event.id,
        "company_id": event.company_id,
        "type": event.type.value,
        "created_at": event.created_at,
        # pydantic-core's encoder: the same JSON as json.dumps (non-ASCII as UTF-8 rather than
        # escaped) in a fifth of the time, for every event written.
        "payload": to_json(event.data, fallback=str).decode(),
    }


class SqlOutbox:
    """The events table, written in the business transaction."""

    def __init__(self, conn: Connection, lock_rows: bool = False) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    def add(self, event: Event) -> None:
        INSERT_EVENT.execute(self._conn, event_values(event))

    @staticmethod
    def _event(row: Row[Any]) -> Event:
        return Event(
            id=row.id,
            type=EventType(row.type),
            company_id=row.company_id,
            created_at=row.created_at,
            data=from_json(row.payload),
        )

    def list(self, company_id: int | None = None) -> list[Event]:
        query = select(t.events).order_by(t.events.c.id)
        if company_id is not None:
            query = query.where(t.events.c.company_id == company_id)
        return [self._event(r) for r in self._conn.execute(query)]

    def undispatched(self, limit: int) -> _Events:
        query = (
            select(t.events)
            .where(t.events.c.dispatched_at.is_(None))
            .order_by(t.events.c.id)
            .limit(limit)
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True)
        return [self._event(r) for r in self._conn.execute(query)]

    def undispatched_heads(self, limit: int) -> _EventHeads:
        events = t.events
        query = (
            select(events.c.id, events.c.company_id, events.c.type)
            .where(events.c.dispatched_at.is_(None))
            .order_by(events.c.id)
            .limit(limit)
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True)
        return [EventHead(i, c, EventType(kind)) for i, c, kind in self._conn.execute(query)]

    def get_many(self, event_ids: Sequence[str]) -> _Events:
        if not event_ids:
            return []
        query = select(t.events).where(t.events.c.id.in_(list(event_ids))).order_by(t.events.c.id)
        return [self._event(r) for r in self._conn.execute(query)]

    def mark_dispatched(self, event_ids: Sequence[str], at: datetime) -> None:
        if event_ids:
            self._conn.execute(
                update(t.events).where(t.events.c.id.in_(event_ids)).values(dispatched_at=at)
            )

    def purge(self, created_before: datetime) -> int:
        events, deliveries = t.events, t.deliveries
        busy = (
            select(deliveries.c.id)
            .where(
                deliveries.c.event_id == events.c.id,
                deliveries.c.status == DeliveryStatus.PENDING.value,
            )
            .exists()
        )
        old = select(events.c.id).where(
            events.c.created_at < created_before,
            events.c.dispatched_at.is_not(None),
            ~busy,
        )
        ids = list(self._conn.execute(old).scalars())
        for start in range(0, len(ids), 500):  # bounded IN lists
            chunk = ids[start : start + 500]
            self._conn.execute(delete(deliveries).where(deliveries.c.event_id.in_(chunk)))
            self._conn.execute(delete(events).where(events.c.id.in_(chunk)))
        return len(ids)

    def get(self, event_id: str, company_id: int | None) -> Event | None:
        query = select(t.events).where(t.events.c.id == event_id)
        if company_id is not None:
            query = query.where(t.events.c.company_id == company_id)
        row = self._conn.execute(query).first()
        return self._event(row) if row is not None else None

    def page(
        self,
        company_id: int,
        *,
        type_: str | None,
        created_gte: datetime | None,
        limit: int,
        starting_after: str | None,
    ) -> _Events:
        events = t.events
        query = select(events).where(events.c.company_id == company_id)
        if type_ is not None:
            query = query.where(events.c.type == type_)
        if created_gte is not None:
            query = query.where(events.c.created_at >= created_gte)
        if starting_after is not None:
            query = query.where(events.c.id < starting_after)
        query = query.order_by(events.c.id.desc()).limit(limit)
        return [self._event(r) for r in self._conn.execute(query)]

    def backlog(self) -> OutboxBacklog:
        events = t.events
        # Both over the partial index of undispatched events (plus a row read each).
        count, oldest = self._conn.execute(
            select(func.count(), func.min(events.c.created_at)).where(
                events.c.dispatched_at.is_(None)
            )
        ).one()
        return OutboxBacklog(count, oldest)
