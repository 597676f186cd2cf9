"""The storage contract's outbox and delivery tests: events committing with their change,
dispatching once, paging, purging, claims under a lease and the backlog."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from treasury_core.movements.bank_files import BankStatementLine, LineOutcome
from treasury_core.notifications.deliveries import (
    Delivery,
    DeliveryAttempt,
    DeliveryKind,
    DeliveryStatus,
)
from treasury_core.notifications.events import Event, EventHead, EventType
from treasury_core.notifications.status import (
    DeliveryBacklog,
    FailingDestination,
    OutboxBacklog,
)
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.fixtures import (
    NOW,
    make_delivery,
    make_event,
    setup_company,
)


class OutboxContract:
    """The outbox and delivery part of
    :class:`~treasury_core.testing.contracts.storage.StorageContract`.

    Mixed into the contract; each test takes the suite's ``storage`` fixture.
    """

    def test_outbox_events_commit_with_the_change(self, storage: Storage) -> None:
        """Events added in a transaction are stored, listed by company."""
        company = setup_company(storage)
        event = Event(
            id="evt_1",
            type=EventType.TRANSFER_COMPLETED,
            company_id=company,
            created_at=NOW,
            data={"object": {"id": "trf_1", "from_amount": 5}},
        )
        storage.run_sync(lambda uow: uow.outbox.add(event))
        assert storage.run_sync(lambda uow: uow.outbox.list(company), write=False) == [event]
        assert storage.run_sync(lambda uow: uow.outbox.list(company + 1), write=False) == []

    def test_a_record_and_the_event_announcing_it_are_added_together(
        self, storage: Storage
    ) -> None:
        """``records.add(record, event)`` stores both, as ``records.add`` then ``outbox.add``
        would; the event waits for dispatch like any other."""
        company = setup_company(storage)
        line = _statement_line(company, "line_1")
        event = make_event(1, company_id=company)
        storage.run_sync(lambda uow: uow.records.add(line, event))
        stored = storage.run_sync(
            lambda uow: uow.records.get(BankStatementLine, line.id, company), write=False
        )
        assert stored == line
        assert storage.run_sync(lambda uow: uow.outbox.list(company), write=False) == [event]
        undispatched = storage.run_sync(lambda uow: uow.outbox.undispatched(10), write=False)
        assert undispatched == [event]

    def test_a_refused_record_writes_no_event(self, storage: Storage) -> None:
        """A record refused for its unique lookup key writes neither itself nor its event."""
        company = setup_company(storage)
        first = _statement_line(company, "line_1")
        storage.run_sync(lambda uow: uow.records.add(first))
        again = _statement_line(company, "line_2")  # the same lookup key, another id
        # Each storage refuses with its own error (memory: ValueError; SQL: IntegrityError).
        with pytest.raises(Exception):  # noqa: B017, PT011
            storage.run_sync(lambda uow: uow.records.add(again, make_event(2, company_id=company)))
        assert storage.run_sync(lambda uow: uow.outbox.list(company), write=False) == []
        assert (
            storage.run_sync(
                lambda uow: uow.records.get(BankStatementLine, again.id, company), write=False
            )
            is None
        )

    def test_events_are_dispatched_once_and_paged_newest_first(self, storage: Storage) -> None:
        """Undispatched events (and their heads) come oldest first; whole events come by id;
        pages filter and come newest first."""
        at = datetime(2026, 1, 2, tzinfo=UTC)

        def write(uow: UnitOfWork) -> None:
            for n in range(5):
                uow.outbox.add(make_event(n, company_id=1 if n < 4 else 2))
            uow.outbox.add(make_event(9, type_=EventType.WITHDRAWAL_FAILED))

        storage.run_sync(write)
        first = storage.run_sync(lambda uow: uow.outbox.undispatched(3))
        assert [e.id for e in first] == ["evt_0000", "evt_0001", "evt_0002"]
        storage.run_sync(lambda uow: uow.outbox.mark_dispatched([e.id for e in first], at))
        rest = storage.run_sync(lambda uow: uow.outbox.undispatched(10))
        assert [e.id for e in rest] == ["evt_0003", "evt_0004", "evt_0009"]

        heads = storage.run_sync(lambda uow: uow.outbox.undispatched_heads(10))
        assert heads == [EventHead(e.id, e.company_id, e.type) for e in rest]
        assert storage.run_sync(lambda uow: uow.outbox.undispatched_heads(1)) == heads[:1]
        # Whole events by id, oldest first whatever the order asked; unknown ids left out.
        wanted = ["evt_0009", "evt_nope", "evt_0001"]
        whole = storage.run_sync(lambda uow: uow.outbox.get_many(wanted), write=False)
        assert whole == [make_event(1), make_event(9, type_=EventType.WITHDRAWAL_FAILED)]
        assert storage.run_sync(lambda uow: uow.outbox.get_many([]), write=False) == []

        page = storage.run_sync(
            lambda uow: uow.outbox.page(
                1, type_=None, created_gte=None, limit=2, starting_after=None
            ),
            write=False,
        )
        assert [e.id for e in page] == ["evt_0009", "evt_0003"]
        page = storage.run_sync(
            lambda uow: uow.outbox.page(
                1, type_=None, created_gte=None, limit=10, starting_after="evt_0003"
            ),
            write=False,
        )
        assert [e.id for e in page] == ["evt_0002", "evt_0001", "evt_0000"]
        typed = storage.run_sync(
            lambda uow: uow.outbox.page(
                1,
                type_="treasury.withdrawal.failed",
                created_gte=None,
                limit=10,
                starting_after=None,
            ),
            write=False,
        )
        assert [e.id for e in typed] == ["evt_0009"]
        recent = storage.run_sync(
            lambda uow: uow.outbox.page(
                1,
                type_=None,
                created_gte=datetime(2026, 1, 1, 0, 2, tzinfo=UTC),
                limit=10,
                starting_after=None,
            ),
            write=False,
        )
        assert [e.id for e in recent] == ["evt_0009", "evt_0003", "evt_0002"]
        assert storage.run_sync(lambda uow: uow.outbox.get("evt_0004", 1), write=False) is None
        found = storage.run_sync(lambda uow: uow.outbox.get("evt_0004", 2), write=False)
        assert found is not None
        assert found.data == {"object": {"id": "dep_4"}}

    def test_deliveries_are_claimed_under_a_lease(self, storage: Storage) -> None:
        """Due deliveries are claimed under a lease; held ones are not claimed until it ends."""
        t0 = NOW

        def write(uow: UnitOfWork) -> None:
            uow.deliveries.add(make_delivery(1, due=t0))
            uow.deliveries.add(make_delivery(2, due=t0 + timedelta(seconds=1)))
            uow.deliveries.add(make_delivery(3, due=t0 + timedelta(hours=1)))

        storage.run_sync(write)
        wall = datetime(2026, 6, 1, tzinfo=UTC)
        lease = wall + timedelta(minutes=1)
        claimed = storage.run_sync(
            lambda uow: uow.deliveries.claim_due(t0 + timedelta(seconds=1), wall, lease, 10)
        )
        assert [d.id for d in claimed] == ["dlv_0001", "dlv_0002"]
        assert all(d.lease_until == lease for d in claimed)
        # Held: nobody else gets them until the lease runs out (wall time).
        again = storage.run_sync(
            lambda uow: uow.deliveries.claim_due(t0 + timedelta(seconds=1), wall, lease, 10)
        )
        assert again == []
        expired = storage.run_sync(
            lambda uow: uow.deliveries.claim_due(
                t0 + timedelta(seconds=1), lease, lease + timedelta(minutes=1), 1
            )
        )
        assert [d.id for d in expired] == ["dlv_0001"]

        attempt = DeliveryAttempt(attempted_at=wall, status_code=200, duration_ms=12, error=None)
        done = expired[0].attempted(attempt, succeeded=True, next_at=None)
        storage.run_sync(lambda uow: uow.deliveries.update(done))
        stored = storage.run_sync(lambda uow: uow.deliveries.get("dlv_0001"), write=False)
        assert stored is not None
        assert stored.status is DeliveryStatus.SUCCEEDED
        assert stored.attempts == (attempt,)
        assert stored.lease_until is None
        later = storage.run_sync(
            lambda uow: uow.deliveries.claim_due(
                t0 + timedelta(days=1), wall + timedelta(days=1), wall + timedelta(days=2), 10
            )
        )
        assert [d.id for d in later] == ["dlv_0002", "dlv_0003"]
        listed = storage.run_sync(lambda uow: uow.deliveries.for_event("evt_0001"), write=False)
        assert [d.id for d in listed] == ["dlv_0001", "dlv_0002", "dlv_0003"]

    def test_a_batch_is_claimed_round_robin_within_the_room_left(self, storage: Storage) -> None:
        """claim_batch: a flooding company or destination does not fill the batch, a
        destination without room is left out, and the rest is as claim_due (due, unleased)."""
        t0 = NOW
        flood, quiet, dead = "https://a.example/h", "https://b.example/h", "http://c.example:8080/h"

        def write(uow: UnitOfWork) -> None:
            for n in range(1, 41):  # company 1 floods, oldest first
                uow.deliveries.add(make_delivery(n, due=t0 + timedelta(milliseconds=n), url=flood))
            for n in range(41, 51):  # a dead receiver of company 1, as old
                uow.deliveries.add(make_delivery(n, due=t0, url=dead))
            uow.deliveries.add(
                make_delivery(51, due=t0 + timedelta(seconds=1), company_id=2, url=quiet)
            )
            uow.deliveries.add(
                make_delivery(52, due=t0 + timedelta(hours=1), company_id=2, url=quiet)
            )

        storage.run_sync(write)
        wall = datetime(2026, 6, 1, tzinfo=UTC)
        lease = wall + timedelta(minutes=1)
        now = t0 + timedelta(seconds=1)

        def claim(limit: int, room: dict[str, int]) -> list[Delivery]:
            return storage.run_sync(
                lambda uow: uow.deliveries.claim_batch(
                    now, wall, lease, limit, per_destination=5, room=room
                )
            )

        # The dead receiver has no room: none of its rows, though they are the oldest.
        first = claim(4, {"http://c.example:8080": 0, "https://a.example:443": 2})
        # Round robin: company 2's only due delivery is in the first batch of four, beside
        # the flood's oldest; the flood gets no more than its room.
        assert sorted(d.id for d in first) == ["dlv_0001", "dlv_0002", "dlv_0051"]
        assert all(d.lease_until == lease for d in first)
        held = storage.run_sync(lambda uow: uow.deliveries.for_event("evt_0001"), write=False)
        assert {d.id for d in held if d.lease_until == lease} == {d.id for d in first}
        second = claim(20, {})
        # At most per_destination (5) of one destination, held ones (leased) left out.
        by_url = Counter(d.url for d in second)
        assert by_url == {flood: 5, dead: 5}
        assert not {d.id for d in first} & {d.id for d in second}
        assert [d.id for d in second if d.url == flood] == [f"dlv_{n:04d}" for n in range(3, 8)]

    def test_a_batch_is_recorded_only_where_its_claim_still_holds(self, storage: Storage) -> None:
        """record_attempts writes the deliveries still as their claim left them, and hands
        back, unwritten, those taken over since (another lease), noted since (one more
        attempt) or finished since; one no longer stored is skipped."""
        t0 = NOW

        def write(uow: UnitOfWork) -> None:
            for n in (1, 2, 3, 4):
                uow.deliveries.add(make_delivery(n, due=t0))

        storage.run_sync(write)
        wall = datetime(2026, 6, 1, tzinfo=UTC)
        lease = wall + timedelta(minutes=1)
        claimed = storage.run_sync(lambda uow: uow.deliveries.claim_due(t0, wall, lease, 10))
        assert [d.id for d in claimed] == ["dlv_0001", "dlv_0002", "dlv_0003", "dlv_0004"]
        ok = DeliveryAttempt(attempted_at=wall, status_code=200, duration_ms=3, error=None)
        late = DeliveryAttempt(attempted_at=wall, status_code=None, duration_ms=9, error="late")
        # dlv_0002: our lease ran out and another worker claimed it; dlv_0003: a late attempt
        # noted under our lease; dlv_0004: finished by someone else.
        later = lease + timedelta(minutes=1)
        storage.run_sync(
            lambda uow: uow.deliveries.update(claimed[1].model_copy(update={"lease_until": later}))
        )
        storage.run_sync(lambda uow: uow.deliveries.update(claimed[2].noted(late)))
        storage.run_sync(
            lambda uow: uow.deliveries.update(
                claimed[3].attempted(ok, succeeded=True, next_at=None)
            )
        )
        pairs = [(d, d.attempted(ok, succeeded=True, next_at=None)) for d in claimed]
        pairs.append((make_delivery(9, due=t0), make_delivery(9, due=t0)))  # never stored
        changed = storage.run_sync(lambda uow: uow.deliveries.record_attempts(pairs))

        assert [d.id for d in changed] == ["dlv_0002", "dlv_0003", "dlv_0004"]
        assert changed == claimed[1:]

        def read(delivery_id: str) -> Delivery:
            found = storage.run_sync(lambda uow: uow.deliveries.get(delivery_id), write=False)
            assert found is not None
            return found

        assert read("dlv_0001") == pairs[0][1]
        assert read("dlv_0001").status is DeliveryStatus.SUCCEEDED
        assert read("dlv_0002").lease_until == later
        assert read("dlv_0002").status is DeliveryStatus.PENDING
        assert read("dlv_0003").attempts == (late,)
        assert read("dlv_0004").attempts == (ok,)
        assert storage.run_sync(lambda uow: uow.deliveries.get("dlv_0009"), write=False) is None
        assert storage.run_sync(lambda uow: uow.deliveries.record_attempts([])) == []

    def test_purge_forgets_only_finished_old_events(self, storage: Storage) -> None:
        """Purging forgets only old dispatched events with no delivery left to make."""
        t0 = NOW

        done = DeliveryAttempt(attempted_at=t0, status_code=200, duration_ms=1, error=None)

        def write(uow: UnitOfWork) -> None:
            for n in range(4):
                uow.outbox.add(make_event(n))  # created t0 + n minutes
            uow.outbox.add(make_event(50))  # recent
            uow.outbox.mark_dispatched(["evt_0000", "evt_0001", "evt_0002", "evt_0050"], t0)
            # evt_0000: delivered; evt_0001: still pending; evt_0002: nothing to deliver;
            # evt_0003: never dispatched.
            uow.deliveries.add(
                make_delivery(1, event_id="evt_0000").attempted(done, succeeded=True, next_at=None)
            )
            uow.deliveries.add(make_delivery(2, event_id="evt_0001"))

        storage.run_sync(write)
        cutoff = t0 + timedelta(minutes=10)
        assert storage.run_sync(lambda uow: uow.outbox.purge(cutoff)) == 2
        left = storage.run_sync(lambda uow: uow.outbox.list(), write=False)
        assert [e.id for e in left] == ["evt_0001", "evt_0003", "evt_0050"]
        assert storage.run_sync(lambda uow: uow.deliveries.get("dlv_0001"), write=False) is None
        assert storage.run_sync(lambda uow: uow.deliveries.get("dlv_0002"), write=False) is not None
        assert storage.run_sync(lambda uow: uow.outbox.purge(cutoff)) == 0

    def test_the_backlog_counts_only_unfinished_work(self, storage: Storage) -> None:
        """The pipeline's backlog: undispatched events, pending and due deliveries, the oldest
        waiting event, recent attempts and the failing destinations, grouped."""
        wall = datetime(2026, 6, 1, 12, tzinfo=UTC)

        def empty(uow: UnitOfWork) -> tuple[OutboxBacklog, DeliveryBacklog]:
            return uow.outbox.backlog(), uow.deliveries.backlog(NOW, wall)

        events, deliveries = storage.run_sync(empty, write=False)
        assert events == OutboxBacklog(0, None)
        assert deliveries == DeliveryBacklog(0, 0, None, 0, ())

        def failed(at: datetime) -> DeliveryAttempt:
            return DeliveryAttempt(
                attempted_at=at, status_code=500, duration_ms=1, error="HTTP 500"
            )

        ok = DeliveryAttempt(
            attempted_at=wall - timedelta(seconds=10), status_code=200, duration_ms=1, error=None
        )
        later = NOW + timedelta(hours=1)

        def write(uow: UnitOfWork) -> None:
            for n in range(5):
                uow.outbox.add(make_event(n))  # created NOW + n minutes
            uow.outbox.mark_dispatched(["evt_0000", "evt_0001", "evt_0002"], NOW)
            uow.deliveries.add(  # finished: in the rate only
                make_delivery(1, event_id="evt_0000").attempted(ok, succeeded=True, next_at=None)
            )
            uow.deliveries.add(make_delivery(2, event_id="evt_0001"))  # due, never tried
            uow.deliveries.add(
                make_delivery(3, event_id="evt_0002").attempted(
                    failed(wall - timedelta(seconds=30)), succeeded=False, next_at=later
                )
            )
            twice = (
                make_delivery(4, event_id="evt_0002")
                .attempted(failed(wall - timedelta(seconds=200)), succeeded=False, next_at=NOW)
                .attempted(
                    failed(wall - timedelta(seconds=90)),
                    succeeded=False,
                    next_at=NOW + timedelta(minutes=30),
                )
            )
            uow.deliveries.add(twice)
            callback = make_delivery(5, event_id="evt_0002").model_copy(
                update={
                    "company_id": 2,
                    "kind": DeliveryKind.LEGACY_CALLBACK,
                    "endpoint_id": None,
                    "url": "https://cb.example:8443/notify?token=t",
                }
            )
            uow.deliveries.add(
                callback.attempted(
                    failed(wall - timedelta(seconds=300)),
                    succeeded=False,
                    next_at=NOW + timedelta(minutes=5),
                )
            )

        storage.run_sync(write)

        def read(uow: UnitOfWork) -> tuple[OutboxBacklog, DeliveryBacklog]:
            since = wall - timedelta(seconds=60)
            return uow.outbox.backlog(), uow.deliveries.backlog(NOW, since)

        events, deliveries = storage.run_sync(read, write=False)
        assert events == OutboxBacklog(2, NOW + timedelta(minutes=3))
        assert (deliveries.pending, deliveries.due) == (4, 1)
        assert deliveries.oldest_event_created_at == NOW + timedelta(minutes=1)
        assert deliveries.attempted_recently == 2  # dlv_0001 and dlv_0003
        assert deliveries.failing == (
            FailingDestination(
                company_id=2,
                endpoint_id=None,
                kind=DeliveryKind.LEGACY_CALLBACK,
                url="https://cb.example:8443/notify?token=t",
                failing_deliveries=1,
                consecutive_failures=1,
                next_attempt_at=NOW + timedelta(minutes=5),
                last_attempt_at=wall - timedelta(seconds=300),
            ),
            FailingDestination(
                company_id=1,
                endpoint_id="we_1",
                kind=DeliveryKind.WEBHOOK,
                url="https://example.com/hook",
                failing_deliveries=2,
                consecutive_failures=2,
                next_attempt_at=NOW + timedelta(minutes=30),
                last_attempt_at=wall - timedelta(seconds=30),
            ),
        )


def _statement_line(company_id: int, line_id: str) -> BankStatementLine:
    """A statement line of ``company_id``; every one made here has the same lookup key."""
    return BankStatementLine(
        id=f"bsl_{line_id}",
        company_id=company_id,
        statement_id="bst_1",
        account="DE89370400440532013000",
        entry_reference="E-1",
        identity="ref:E-1",
        direction="credit",
        amount=100,
        currency="EUR",
        booking_date=NOW.date(),
        reference=None,
        outcome=LineOutcome.UNMATCHED,
        matched_id=None,
        reason=None,
        created_at=NOW,
    )
