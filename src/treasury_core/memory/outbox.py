"""The in-memory storage's outbox and webhook deliveries (see
:mod:`treasury_core.memory.storage`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from treasury_core.memory.state import (
    MemoryTransaction,
    newest_first,
)
from treasury_core.notifications.deliveries import Delivery, DeliveryStatus, fair_pick
from treasury_core.notifications.events import Event, EventHead
from treasury_core.notifications.status import DeliveryBacklog, FailingDestination, OutboxBacklog

_Events = list[Event]  # spelled here: inside the outbox classes, ``list`` is a method
_EventHeads = list[EventHead]


class MemoryOutbox:
    def __init__(self, tx: MemoryTransaction) -> None:
        self._tx = tx

    def add(self, event: Event) -> None:
        self._tx.append(self._tx.state.events, event)

    def list(self, company_id: int | None = None) -> list[Event]:
        events = self._tx.state.events
        return [e for e in events if company_id is None or e.company_id == company_id]

    def undispatched(self, limit: int) -> _Events:
        done = self._tx.state.dispatched
        return [e for e in self._tx.state.events if e.id not in done][:limit]

    def undispatched_heads(self, limit: int) -> _EventHeads:
        return [EventHead(e.id, e.company_id, e.type) for e in self.undispatched(limit)]

    def get_many(self, event_ids: Sequence[str]) -> _Events:
        wanted = set(event_ids)
        return [e for e in self._tx.state.events if e.id in wanted]

    def mark_dispatched(self, event_ids: Sequence[str], at: datetime) -> None:
        for event_id in event_ids:
            self._tx.put(self._tx.state.dispatched, event_id, at)

    def purge(self, created_before: datetime) -> int:
        state = self._tx.state
        busy = {d.event_id for d in state.deliveries.values() if d.status is DeliveryStatus.PENDING}
        gone = {
            e.id
            for e in state.events
            if e.created_at < created_before and e.id in state.dispatched and e.id not in busy
        }
        for delivery in [d for d in state.deliveries.values() if d.event_id in gone]:
            self._tx.remove(state.deliveries, delivery.id)
        kept = [e for e in state.events if e.id not in gone]
        old = list(state.events)
        state.events[:] = kept
        self._tx.on_rollback(lambda: state.events.__setitem__(slice(None), old))
        return len(gone)

    def get(self, event_id: str, company_id: int | None) -> Event | None:
        for event in self._tx.state.events:
            if event.id == event_id and company_id in (None, event.company_id):
                return event
        return None

    def page(
        self,
        company_id: int,
        *,
        type_: str | None,
        created_gte: datetime | None,
        limit: int,
        starting_after: str | None,
    ) -> _Events:
        rows = [
            e
            for e in self._tx.state.events
            if e.company_id == company_id
            and (type_ is None or e.type.value == type_)
            and (created_gte is None or e.created_at >= created_gte)
        ]
        return newest_first(rows, lambda e: e.id, limit, starting_after)

    def backlog(self) -> OutboxBacklog:
        done = self._tx.state.dispatched
        waiting = [e.created_at for e in self._tx.state.events if e.id not in done]
        return OutboxBacklog(len(waiting), min(waiting, default=None))


class MemoryDeliveries:
    def __init__(self, tx: MemoryTransaction) -> None:
        self._tx = tx

    def add(self, delivery: Delivery) -> None:
        self._tx.put(self._tx.state.deliveries, delivery.id, delivery)

    def claim_due(
        self, now: datetime, wall_now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        due = [
            d
            for d in self._tx.state.deliveries.values()
            if d.status is DeliveryStatus.PENDING
            and d.next_attempt_at <= now
            and (d.lease_until is None or d.lease_until <= wall_now)
        ]
        due.sort(key=lambda d: (d.next_attempt_at, d.id))
        claimed = [d.model_copy(update={"lease_until": lease_until}) for d in due[:limit]]
        for delivery in claimed:
            self.update(delivery)
        return claimed

    def claim_batch(
        self,
        now: datetime,
        wall_now: datetime,
        lease_until: datetime,
        limit: int,
        *,
        per_destination: int,
        room: Mapping[str, int],
    ) -> list[Delivery]:
        pairs: dict[tuple[int, str], list[Delivery]] = {}
        for d in self._tx.state.deliveries.values():
            if (
                d.status is DeliveryStatus.PENDING
                and d.next_attempt_at <= now
                and (d.lease_until is None or d.lease_until <= wall_now)
                and room.get(d.destination, per_destination) > 0
            ):
                pairs.setdefault((d.company_id, d.destination), []).append(d)
        ranked: list[tuple[int, datetime, str, Delivery]] = []
        for queue in pairs.values():
            queue.sort(key=lambda d: (d.next_attempt_at, d.id))
            ranked += [
                (n, d.next_attempt_at, d.id, d) for n, d in enumerate(queue[:per_destination])
            ]
        ranked.sort(key=lambda r: r[:3])
        candidates = [r[3] for r in ranked[:limit]]
        claimed = fair_pick(candidates, limit, per_destination, room, lease_until)
        for delivery in claimed:
            self.update(delivery)
        return claimed

    def get(self, delivery_id: str, *, for_update: bool = False) -> Delivery | None:
        return self._tx.state.deliveries.get(delivery_id)

    def record_attempts(self, attempted: Sequence[tuple[Delivery, Delivery]]) -> list[Delivery]:
        changed = []
        for claimed, new in attempted:
            stored = self._tx.state.deliveries.get(claimed.id)
            if stored is None:
                continue
            if (
                stored.status is DeliveryStatus.PENDING
                and stored.lease_until == claimed.lease_until
                and len(stored.attempts) == len(claimed.attempts)
            ):
                self.update(new)
            else:
                changed.append(claimed)
        return changed

    def update(self, delivery: Delivery) -> None:
        self._tx.put(self._tx.state.deliveries, delivery.id, delivery)

    def for_event(self, event_id: str) -> list[Delivery]:
        found = [d for d in self._tx.state.deliveries.values() if d.event_id == event_id]
        return sorted(found, key=lambda d: d.id)

    def backlog(self, now: datetime, attempted_since: datetime) -> DeliveryBacklog:
        state = self._tx.state
        pending = [d for d in state.deliveries.values() if d.status is DeliveryStatus.PENDING]
        waiting = {d.event_id for d in pending}
        created = [e.created_at for e in state.events if e.id in waiting]
        recent = sum(
            1
            for d in state.deliveries.values()
            if d.attempts and d.attempts[-1].attempted_at >= attempted_since
        )
        groups: dict[tuple[int, str | None], list[Delivery]] = {}
        for delivery in sorted(pending, key=lambda d: d.id):
            if delivery.attempts:
                groups.setdefault((delivery.company_id, delivery.endpoint_id), []).append(delivery)
        failing = []
        for (company_id, endpoint_id), rows in groups.items():
            latest = max(rows, key=lambda d: (d.attempts[-1].attempted_at, d.id))
            failing.append(
                FailingDestination(
                    company_id=company_id,
                    endpoint_id=endpoint_id,
                    kind=latest.kind,
                    url=latest.url,
                    failing_deliveries=len(rows),
                    consecutive_failures=max(len(d.attempts) for d in rows),
                    next_attempt_at=min(d.next_attempt_at for d in rows),
                    last_attempt_at=latest.attempts[-1].attempted_at,
                )
            )
        failing.sort(key=lambda f: (f.next_attempt_at, f.company_id, f.endpoint_id or ""))
        return DeliveryBacklog(
            pending=len(pending),
            due=sum(1 for d in pending if d.next_attempt_at <= now),
            oldest_event_created_at=min(created, default=None),
            attempted_recently=recent,
            failing=tuple(failing),
        )
