"""The PostgreSQL delivery claim (``treasury_sqlalchemy.delivery_claim``) over many endpoints.

The claim on PostgreSQL skips from one (company, destination) to the next through an index and
reads only each one's first due rows; the portable claim numbers every due row with a window
function. Both must choose the same deliveries in the same order, whatever the backlog holds:
many companies and destinations, rows not yet due, rows leased by another worker, finished rows,
a destination at its limit of sends in flight, and a NULL destination (a row from before
migration 0008). The storage contract covers the rules on a small backlog; this covers the two
queries agreeing on a large, mixed one, and the round robin across many endpoints.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import update

from treasury_core.notifications.deliveries import Delivery, DeliveryStatus
from treasury_core.testing.contracts.storage import NOW
from treasury_sqlalchemy import schema as t
from treasury_sqlalchemy.delivery_claim import claim_candidates
from treasury_sqlalchemy.repositories import SqlUnitOfWork
from treasury_sqlalchemy.storage import SqlStorage

pytestmark = pytest.mark.postgres

WALL = NOW + timedelta(days=1)
LEASE = WALL + timedelta(minutes=1)
DUE_BY = NOW + timedelta(seconds=30)
DEAD = "http://dead.example:8080"


def _url(company: int, n: int) -> str:
    # A receiver of each company's own: the limit on sends in flight is per destination, so a
    # receiver shared by companies would cap their round robin together.
    return f"https://c{company}-receiver-{n}.example/hooks"


@pytest.fixture
def storage(postgres_url: str) -> Iterator[SqlStorage]:
    storage = SqlStorage(postgres_url, pool_size=2)
    storage.migrate()
    try:
        yield storage
    finally:
        storage.close()


def _backlog(storage: SqlStorage, *, legacy: bool = True) -> None:
    """3 companies x 12 receivers with 1-60 deliveries each, a dead receiver of company 1
    holding the oldest 300, some not due, leased or finished, and (``legacy``) rows without a
    destination."""
    rng = random.Random(2026)
    deliveries: list[Delivery] = []
    n = 0

    def add(company: int, url: str, due_ms: int) -> Delivery:
        nonlocal n
        n += 1
        delivery = Delivery.model_validate(
            {
                "id": f"dlv_{n:05d}",
                "company_id": company,
                "event_id": f"evt_{n:05d}",
                "event_type": "payment_intent.created",
                "kind": "webhook",
                "endpoint_id": f"we_{company}_{url}",
                "url": url,
                "payload": "{}",
                "next_attempt_at": NOW + timedelta(milliseconds=due_ms),
                "created_at": NOW,
            }
        )
        deliveries.append(delivery)
        return delivery

    for _ in range(300):
        add(1, DEAD + "/h", 0)
    for company in (1, 2, 3):
        for receiver in range(12):
            for _ in range(rng.randint(1, 60)):
                # Due over the next minute: DUE_BY leaves about half of them not yet due.
                add(company, _url(company, receiver), rng.randint(0, 60_000))
    storage.run_sync(lambda uow: [uow.deliveries.add(d) for d in deliveries])
    rows = t.deliveries
    some = [d.id for d in deliveries]
    rng.shuffle(some)
    leased, finished, old = some[:150], some[150:250], some[250:300]

    def mark(uow: SqlUnitOfWork) -> None:
        conn = uow.connection  # the states other workers would have left
        conn.execute(update(rows).where(rows.c.id.in_(leased)).values(lease_until=LEASE))
        conn.execute(
            update(rows)
            .where(rows.c.id.in_(finished))
            .values(status=DeliveryStatus.SUCCEEDED.value)
        )
        if legacy:
            conn.execute(update(rows).where(rows.c.id.in_(old)).values(destination=None))

    storage.run_sync(mark)  # type: ignore[arg-type]


def _both(
    storage: SqlStorage, limit: int, per_destination: int, full: list[str]
) -> tuple[list[str], list[str]]:
    """The ids each query offers, in order, both read in one transaction (which writes
    nothing: candidates are locked, not leased)."""
    with storage.transaction() as uow:
        assert isinstance(uow, SqlUnitOfWork)
        conn = uow.connection
        portable = uow.deliveries._ranked_candidates(DUE_BY, WALL, limit, per_destination, full)
        bodies = claim_candidates(
            conn, DUE_BY, WALL, limit, per_destination=per_destination, full=full
        )
    return [d.id for d in portable], [Delivery.model_validate_json(b).id for b in bodies]


@pytest.mark.parametrize(
    ("limit", "per_destination", "full"),
    [(200, 64, []), (200, 64, [DEAD]), (50, 3, [DEAD]), (1000, 5, []), (7, 64, [])],
)
def test_the_indexed_claim_offers_what_the_window_function_does(
    storage: SqlStorage, limit: int, per_destination: int, full: list[str]
) -> None:
    _backlog(storage)
    portable, indexed = _both(storage, limit, per_destination, full)
    assert portable, "the backlog has due deliveries"
    assert indexed == portable


def test_a_batch_goes_round_robin_across_many_endpoints(storage: SqlStorage) -> None:
    # No rows without a destination: the claim groups those apart (as one per company), while
    # the limit counts them at their URL's destination, which would blur the rounds below.
    _backlog(storage, legacy=False)
    room = {DEAD: 0}
    claimed = storage.run_sync(
        lambda uow: uow.deliveries.claim_batch(
            DUE_BY, WALL, LEASE, 200, per_destination=8, room=room
        )
    )
    # Leased and finished rows are never offered; what was claimed is now leased, so a claim
    # of everything left finds the rest of the due rows and none of these.
    rest = storage.run_sync(
        lambda uow: uow.deliveries.claim_batch(
            DUE_BY, WALL, LEASE, 10_000, per_destination=10_000, room=room
        )
    )
    assert not {d.id for d in claimed} & {d.id for d in rest}
    assert all(d.next_attempt_at <= DUE_BY for d in [*claimed, *rest])
    assert len(claimed) == 200
    got = Counter((d.company_id, d.destination) for d in claimed)
    available = got + Counter((d.company_id, d.destination) for d in rest)
    # The dead receiver's 300, the oldest of all, take nothing: it has no room.
    assert all(destination != DEAD for _, destination in available)
    assert len(available) >= 30
    # Round robin: every (company, receiver) got a turn before any got a second, and so on:
    # those with rows left all got the same number of turns, give or take the last round, and
    # the others all they had. None more than per_destination.
    rounds = min(n for pair, n in got.items() if n < available[pair])
    assert all(got[pair] >= min(available[pair], rounds) for pair in available)
    assert all(n <= rounds + 1 for n in got.values())
    assert max(got.values()) <= 8
