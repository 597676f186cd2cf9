"""Writing deliveries' rows: the values of a row, and the record of a batch's attempts.

Kept apart from ``deliveries.py`` (``SqlDeliveries`` takes these from :class:`DeliveryRows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from treasury_core.notifications.deliveries import Delivery, DeliveryStatus
from treasury_sqlalchemy import schema as t

#: The columns come from the parameters' keys (every column but ``id``).
UPDATE_DELIVERY = update(t.deliveries).where(t.deliveries.c.id == bindparam("delivery_id"))


class DeliveryRows:
    """The row side of deliveries that a batch's record shares with the rest."""

    _conn: Connection
    _lock_rows: bool

    @staticmethod
    def _values(delivery: Delivery) -> dict[str, Any]:
        return {
            "id": delivery.id,
            "company_id": delivery.company_id,
            "event_id": delivery.event_id,
            "status": delivery.status.value,
            "next_attempt_at": delivery.next_attempt_at,
            "lease_until": delivery.lease_until,
            "body": delivery.model_dump_json(),
            "destination": delivery.destination,
            "endpoint_id": delivery.endpoint_id,
            "attempts": len(delivery.attempts),
            "last_attempt_at": delivery.attempts[-1].attempted_at if delivery.attempts else None,
        }

    def record_attempts(self, attempted: Sequence[tuple[Delivery, Delivery]]) -> list[Delivery]:
        """See :meth:`treasury_core.ports.storage.DeliveryRepository.record_attempts`.

        Two statements for the whole batch: a read of the rows' state columns only (locked on
        PostgreSQL, as recording one delivery locks its row), and one ``executemany`` of the
        rewrites: reading and parsing each row's whole body and writing it back one statement
        at a time would cost a round trip per delivery.
        """
        if not attempted:
            return []
        rows = t.deliveries
        query = select(rows.c.id, rows.c.status, rows.c.lease_until, rows.c.attempts).where(
            rows.c.id.in_([claimed.id for claimed, _ in attempted])
        )
        if self._lock_rows:
            query = query.with_for_update()
        stored = {row[0]: tuple(row[1:]) for row in self._conn.execute(query)}
        held, changed = [], []
        for claimed, new in attempted:
            # As the claim left it: pending, under this claim's lease, and no attempt noted
            # since by a worker whose own lease had run out (that would change the count).
            expected = (DeliveryStatus.PENDING.value, claimed.lease_until, len(claimed.attempts))
            if stored.get(claimed.id) == expected:
                values = self._values(new)
                values["delivery_id"] = values.pop("id")
                held.append(values)
            elif claimed.id in stored:
                changed.append(claimed)
        if held:
            self._conn.execute(UPDATE_DELIVERY, held)
        return changed
