"""Webhook and callback deliveries: indexed columns plus the delivery as JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import Connection, bindparam, func, or_, select

from treasury_core.notifications.deliveries import Delivery, DeliveryKind, DeliveryStatus, fair_pick
from treasury_core.notifications.status import DeliveryBacklog, FailingDestination
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.delivery_claim import claim_candidates
from treasury_sqlalchemy.delivery_records import UPDATE_DELIVERY, DeliveryRows
from treasury_sqlalchemy.hot import HotInsert, HotQuery

# A delivery is written at the fan-out, and read and rewritten at its claim and its record:
# built once each (a statement built per call cost more than running it).
_INSERT_DELIVERY = HotInsert(t.deliveries)
_DELIVERY_BY_ID = select(t.deliveries.c.body, t.deliveries.c.lease_until).where(
    t.deliveries.c.id == bindparam("delivery_id")
)
_DELIVERY_QUERIES = {
    locked: HotQuery(_DELIVERY_BY_ID.with_for_update() if locked else _DELIVERY_BY_ID)
    for locked in (False, True)
}
_UPDATE_DELIVERY = UPDATE_DELIVERY
#: A claim sets the lease column alone; the column, not the body, is the lease (see _stored).
_LEASE_DELIVERY = _UPDATE_DELIVERY.values(lease_until=bindparam("lease"))


class SqlDeliveries(DeliveryRows):
    """Deliveries: indexed columns plus the delivery as JSON; workers skip held rows."""

    def __init__(self, conn: Connection, lock_rows: bool) -> None:
        self._conn = conn
        self._lock_rows = lock_rows

    @staticmethod
    def _stored(body: str, lease_until: datetime | None) -> Delivery:
        # A claim writes the lease column only (rewriting the whole body, payload included, for
        # one field cost more than the rest of the claim), so the body's copy may be stale.
        delivery = Delivery.model_validate_json(body)
        if delivery.lease_until != lease_until:
            delivery = delivery.model_copy(update={"lease_until": lease_until})
        return delivery

    def _lease_all(self, deliveries: Sequence[Delivery]) -> None:
        self._conn.execute(
            _LEASE_DELIVERY,
            [{"delivery_id": d.id, "lease": d.lease_until} for d in deliveries],
        )

    def add(self, delivery: Delivery) -> None:
        _INSERT_DELIVERY.execute(self._conn, self._values(delivery))

    def claim_due(
        self, now: datetime, wall_now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        rows = t.deliveries
        query = (
            select(rows.c.body)
            .where(
                rows.c.status == DeliveryStatus.PENDING.value,
                rows.c.next_attempt_at <= now,
                or_(rows.c.lease_until.is_(None), rows.c.lease_until <= wall_now),
            )
            .order_by(rows.c.next_attempt_at, rows.c.id)
            .limit(limit)
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True)
        claimed = [
            Delivery.model_validate_json(body).model_copy(update={"lease_until": lease_until})
            for body in self._conn.execute(query).scalars()
        ]
        if claimed:
            self._lease_all(claimed)
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
        full = sorted(d for d, free in room.items() if free <= 0)
        if self._conn.dialect.name == "postgresql":
            # One destination at a time through an index, not a sort of the whole backlog.
            bodies = claim_candidates(
                self._conn, now, wall_now, limit, per_destination=per_destination, full=full
            )
            candidates = [Delivery.model_validate_json(b) for b in bodies]
        else:
            candidates = self._ranked_candidates(now, wall_now, limit, per_destination, full)
        claimed = fair_pick(candidates, limit, per_destination, room, lease_until)
        if claimed:
            self._lease_all(claimed)
        return claimed

    def _ranked_candidates(
        self,
        now: datetime,
        wall_now: datetime,
        limit: int,
        per_destination: int,
        full: Sequence[str],
    ) -> list[Delivery]:
        """The claim's candidates on any SQL database (SQLite here): every due delivery
        numbered within its (company, destination) by a window function."""
        rows = t.deliveries
        due = (
            rows.c.status == DeliveryStatus.PENDING.value,
            rows.c.next_attempt_at <= now,
            or_(rows.c.lease_until.is_(None), rows.c.lease_until <= wall_now),
        )
        wanted = [*due]
        if full:
            wanted.append(or_(rows.c.destination.is_(None), rows.c.destination.not_in(full)))
        # Each row's place within its (company, destination): taking the first of every pair,
        # then the second, … is the round robin. The window cannot carry FOR UPDATE on
        # PostgreSQL, so the rows are locked by the outer query, which checks again that they
        # are still due (another worker may have leased one since).
        ranked = (
            select(
                rows.c.id,
                rows.c.next_attempt_at,
                func.row_number()
                .over(
                    partition_by=(rows.c.company_id, rows.c.destination),
                    order_by=(rows.c.next_attempt_at, rows.c.id),
                )
                .label("turn"),
            )
            .where(*wanted)
            .subquery()
        )
        chosen = (
            select(ranked.c.id, ranked.c.turn, ranked.c.next_attempt_at)
            .where(ranked.c.turn <= per_destination)
            .order_by(ranked.c.turn, ranked.c.next_attempt_at, ranked.c.id)
            .limit(limit)
            .subquery()
        )
        query = (
            select(rows.c.body)
            .join(chosen, chosen.c.id == rows.c.id)
            .where(*due)
            .order_by(chosen.c.turn, chosen.c.next_attempt_at, chosen.c.id)
        )
        if self._lock_rows:
            query = query.with_for_update(skip_locked=True, of=rows)
        return [Delivery.model_validate_json(b) for b in self._conn.execute(query).scalars()]

    def get(self, delivery_id: str, *, for_update: bool = False) -> Delivery | None:
        row = _DELIVERY_QUERIES[for_update and self._lock_rows].first(
            self._conn, {"delivery_id": delivery_id}
        )
        return self._stored(row[0], row[1]) if row is not None else None

    def update(self, delivery: Delivery) -> None:
        values = self._values(delivery)
        values["delivery_id"] = values.pop("id")
        self._conn.execute(_UPDATE_DELIVERY, values)

    def for_event(self, event_id: str) -> list[Delivery]:
        query = (
            select(t.deliveries.c.body, t.deliveries.c.lease_until)
            .where(t.deliveries.c.event_id == event_id)
            .order_by(t.deliveries.c.id)
        )
        return [self._stored(body, lease) for body, lease in self._conn.execute(query)]

    def backlog(self, now: datetime, attempted_since: datetime) -> DeliveryBacklog:
        rows, events = t.deliveries, t.events
        pending = rows.c.status == DeliveryStatus.PENDING.value
        # Each over the partial index of pending deliveries (the due one a range of it).
        count = self._conn.execute(select(func.count()).where(pending)).scalar_one()
        due = self._conn.execute(
            select(func.count()).where(pending, rows.c.next_attempt_at <= now)
        ).scalar_one()
        oldest = self._conn.execute(
            select(func.min(events.c.created_at))
            .select_from(rows.join(events, events.c.id == rows.c.event_id))
            .where(pending)
        ).scalar()
        recent = self._conn.execute(
            select(func.count()).where(rows.c.last_attempt_at >= attempted_since)
        ).scalar_one()
        groups = self._conn.execute(
            select(
                rows.c.company_id,
                rows.c.endpoint_id,
                func.count(),
                func.max(rows.c.attempts),
                func.min(rows.c.next_attempt_at),
                func.max(rows.c.last_attempt_at),
            )
            .where(pending, rows.c.attempts > 0)
            .group_by(rows.c.company_id, rows.c.endpoint_id)
        ).all()
        failing = []
        for company_id, endpoint_id, failing_count, most, next_at, last_at in groups:
            # The group's delivery attempted last tells its kind and URL.
            latest = self._conn.execute(
                select(rows.c.body)
                .where(
                    pending,
                    rows.c.attempts > 0,
                    rows.c.company_id == company_id,
                    rows.c.endpoint_id.is_(None)
                    if endpoint_id is None
                    else rows.c.endpoint_id == endpoint_id,
                )
                .order_by(rows.c.last_attempt_at.desc(), rows.c.id.desc())
                .limit(1)
            ).scalar_one()
            sample = Delivery.model_validate_json(latest)
            failing.append(
                FailingDestination(
                    company_id=company_id,
                    endpoint_id=endpoint_id,
                    kind=DeliveryKind(sample.kind),
                    url=sample.url,
                    failing_deliveries=failing_count,
                    consecutive_failures=most,
                    next_attempt_at=next_at,
                    last_attempt_at=last_at,
                )
            )
        failing.sort(key=lambda f: (f.next_attempt_at, f.company_id, f.endpoint_id or ""))
        return DeliveryBacklog(
            pending=count,
            due=due,
            oldest_event_created_at=oldest,
            attempted_recently=recent,
            failing=tuple(failing),
        )
