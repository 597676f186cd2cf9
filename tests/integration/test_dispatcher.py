"""The outbox dispatcher with fake senders that implement the port: two workers over one
PostgreSQL, a worker that died holding a lease, and in-process subscribers."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Generator, Mapping
from datetime import timedelta
from functools import partial
from typing import Literal

import pytest
from sqlalchemy import text

from treasury_core import Treasury, TreasuryConfig, bootstrap
from treasury_core.notifications.deliveries import Delivery, DeliveryStatus
from treasury_core.notifications.endpoints import CreateWebhookEndpointRequest
from treasury_core.notifications.events import Event, EventType
from treasury_core.notifications.schedule import MAX_ATTEMPTS, RETRY_DELAYS
from treasury_core.payments.intents import PaymentType
from treasury_core.payments.requests import CreateIntentRequest
from treasury_core.plugins import hookimpl, make_plugin_manager
from treasury_core.plugins.subscribers import event_subscribers
from treasury_core.ports import DeliveryFailed, UnitOfWork
from treasury_core.services.notifications.service import NotificationService
from treasury_core.testing.fakes.clock import FakeClock


class CountingSender:
    """A webhook sender that answers 200 and counts what it was sent, by ``webhook-id``."""

    def __init__(self) -> None:
        self.sent: Counter[str] = Counter()

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        self.sent[headers["webhook-id"]] += 1
        return 200


class PairedSender(CountingSender):
    """One of two workers' senders, counting into a shared tally: each send waits until the
    other worker is sending too (or has finished), so both hold claimed, unanswered
    deliveries at the same time, where a double claim would show."""

    def __init__(self, sent: Counter[str], mine: asyncio.Event, other: asyncio.Event) -> None:
        super().__init__()
        self.sent, self.mine, self.other = sent, mine, other

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        self.mine.set()
        await self.other.wait()
        return await super().send(url, body, headers)


async def make_events(
    treasury: Treasury, count: int, *, endpoint: bool = True
) -> tuple[int, list[str]]:
    """A company (with an endpoint that takes every type, unless ``endpoint`` is false) and
    ``count`` intents of it; the company's id and the intents' ids."""
    created = await treasury.companies.create_company("Acme")
    company, account = created.company.id, created.merchant_account.id
    if endpoint:
        await treasury.notifications.create_endpoint(
            company, CreateWebhookEndpointRequest(url="https://merchant.example/hooks")
        )
    return company, await create_intents(treasury, company, account, count)


async def create_intents(treasury: Treasury, company: int, account: int, count: int) -> list[str]:
    """``count`` intents of the company's merchant ``account`` (an event each); their ids."""
    ids = []
    for n in range(count):
        intent = await treasury.payments.create(
            company,
            CreateIntentRequest(
                account_id=account,
                billing_amount=100 + n,
                billing_currency="USD",
                payment_type=PaymentType.CARD_PAYMENT,
            ),
        )
        ids.append(str(intent.id))
    return ids


async def test_two_workers_on_postgres_send_each_event_once(
    postgres_url: str, clock: FakeClock
) -> None:
    config = TreasuryConfig(database_url=postgres_url, pool_size=4)
    first = bootstrap(config, clock=clock, wall_clock=clock)
    second = bootstrap(config, clock=clock, wall_clock=clock, migrate=False)
    try:
        company, _ = await make_events(first, 60)
        sent: Counter[str] = Counter()
        busy = asyncio.Event(), asyncio.Event()
        first.notifications.sender = PairedSender(sent, busy[0], busy[1])
        second.notifications.sender = PairedSender(sent, busy[1], busy[0])

        async def work(treasury: Treasury, done: asyncio.Event) -> None:
            try:
                await treasury.notifications.run_due()
            finally:
                done.set()  # a worker left with nothing to send no longer holds the other

        await asyncio.gather(work(first, busy[0]), work(second, busy[1]))
        events = await first.storage.run(lambda uow: uow.outbox.list(company), write=False)
        assert len(events) == 60
        assert sent == Counter({e.id: 1 for e in events})
    finally:
        first.close()
        second.close()


async def test_a_dead_workers_deliveries_go_once_its_lease_runs_out(
    sqlite_url: str, clock: FakeClock
) -> None:
    treasury = bootstrap(TreasuryConfig(database_url=sqlite_url), clock=clock, wall_clock=clock)
    try:
        await make_events(treasury, 3)
        await treasury.notifications.dispatch()
        real_time = FakeClock()
        sender = CountingSender()
        service = NotificationService(
            storage=treasury.storage,
            clock=treasury.clock,
            ids=treasury.ids,
            config=treasury.config,
            vault=treasury.cards.vault,
            wall_clock=real_time,
            subscribers=partial(event_subscribers, treasury.plugins),
            sender=sender,
        )
        # A worker claims everything, then dies before sending or recording anything.
        now, wall = clock.now(), real_time.now()
        claimed = await treasury.storage.run(
            lambda uow: uow.deliveries.claim_due(now, wall, wall + service.lease, 100)
        )
        assert len(claimed) == 3
        assert await service.deliver_due() == 0  # held by the dead worker's lease
        real_time.advance(service.lease.total_seconds())
        assert await service.deliver_due() == 3
        assert sum(sender.sent.values()) == 3
        assert await service.deliver_due() == 0  # succeeded: nothing left
    finally:
        treasury.close()


async def test_subscribers_hear_every_dispatched_event(sqlite_url: str, clock: FakeClock) -> None:
    heard: list[Event] = []

    class Subscriber:
        @hookimpl
        def treasury_event(self, event: Event) -> None:
            heard.append(event)

    class Broken:
        @hookimpl
        def treasury_event(self, event: Event) -> None:
            raise RuntimeError("a subscriber's bug")

    ticks: list[int] = []

    class NoArguments:
        @hookimpl
        def treasury_event(self) -> None:  # pluggy lets an implementation take fewer
            ticks.append(1)

    pm = make_plugin_manager(plugins=[Subscriber(), Broken(), NoArguments()])
    treasury = bootstrap(
        TreasuryConfig(database_url=sqlite_url), plugins=pm, clock=clock, wall_clock=clock
    )
    try:
        company, _ = await make_events(treasury, 2)
        treasury.notifications.sender = CountingSender()
        await treasury.notifications.run_due()
        events = await treasury.storage.run(lambda uow: uow.outbox.list(company), write=False)
        assert [e.id for e in heard] == [e.id for e in events]
        assert len(ticks) == len(events)
        # A broken subscriber stops neither the others nor the deliveries.
        assert treasury.notifications.sender.sent == Counter(  # type: ignore[union-attr]
            {e.id: 1 for e in events}
        )
        await treasury.notifications.run_due()
        assert len(heard) == 2  # once each
    finally:
        treasury.close()


async def test_subscribers_are_called_through_pluggy(sqlite_url: str, clock: FakeClock) -> None:
    # Ordering marks decide the order of the calls, and a wrapper runs around every
    # subscriber, the one that raises included: they are pluggy's hook calls, not a loop.
    calls: list[str] = []

    class Last:
        @hookimpl(trylast=True)
        def treasury_event(self, event: Event) -> None:
            calls.append("last")

    class First:
        @hookimpl(tryfirst=True)
        def treasury_event(self, event: Event) -> None:
            calls.append("first")
            raise RuntimeError("a subscriber's bug")

    class Middle:
        @hookimpl
        def treasury_event(self, event: Event) -> None:
            calls.append("middle")

    class Timing:
        @hookimpl(wrapper=True)
        def treasury_event(self, event: Event) -> Generator[None, None, None]:
            calls.append("wrap")
            return (yield)

    pm = make_plugin_manager(plugins=[Last(), First(), Middle(), Timing()])
    treasury = bootstrap(
        TreasuryConfig(database_url=sqlite_url), plugins=pm, clock=clock, wall_clock=clock
    )
    try:
        await make_events(treasury, 1)
        treasury.notifications.sender = CountingSender()
        await treasury.notifications.run_due()
        one_event = ["wrap", "first", "wrap", "middle", "wrap", "last"]
        assert calls[: len(one_event)] == one_event
        assert len(calls) % len(one_event) == 0
    finally:
        treasury.close()


async def test_only_events_that_may_make_a_delivery_are_read_whole(
    sqlite_url: str, clock: FakeClock
) -> None:
    treasury = bootstrap(TreasuryConfig(database_url=sqlite_url), clock=clock, wall_clock=clock)
    try:
        company, intents = await make_events(treasury, 2)  # an endpoint that takes every type
        quiet = (await treasury.companies.create_company("Quiet")).company.id
        picky = (await treasury.companies.create_company("Picky")).company.id
        await treasury.notifications.create_endpoint(
            picky,
            CreateWebhookEndpointRequest(
                url="https://picky.example/hooks", events=[EventType.TRANSFER_COMPLETED]
            ),
        )

        def event(n: int, company_id: int, type_: EventType) -> Event:
            return Event(
                id=f"evt_{n:026d}",  # sort before the intents' events
                type=type_,
                company_id=company_id,
                created_at=clock.now(),
                data={"object": {"id": f"trf_{n}"}},
            )

        # No endpoint of Quiet's, and none of Picky's for a failed transfer: no delivery.
        skipped = [
            event(1, quiet, EventType.TRANSFER_COMPLETED),
            event(2, picky, EventType.TRANSFER_FAILED),
        ]
        taken = event(3, picky, EventType.TRANSFER_COMPLETED)

        def write(uow: UnitOfWork) -> None:
            for e in [*skipped, taken]:
                uow.outbox.add(e)
            # Payloads nobody can parse: reading one whole would fail the dispatch.
            uow.connection.execute(  # type: ignore[attr-defined]
                text("UPDATE events SET payload = 'not JSON' WHERE id IN (:a, :b)"),
                {"a": skipped[0].id, "b": skipped[1].id},
            )

        await treasury.storage.run(write)
        assert await treasury.notifications.dispatch() == 5  # the intents' two, and these
        assert await treasury.storage.run(lambda uow: uow.outbox.undispatched(10)) == []

        def deliveries(uow: UnitOfWork) -> list[tuple[str, int, str]]:
            rows = uow.connection.execute(  # type: ignore[attr-defined]
                text("SELECT event_id, company_id, body FROM deliveries ORDER BY event_id")
            )
            return [(e, c, json.loads(body)["url"]) for e, c, body in rows]

        made = await treasury.storage.run(deliveries, write=False)
        events = await treasury.storage.run(lambda uow: uow.outbox.list(company), write=False)
        assert made == [
            (taken.id, picky, "https://picky.example/hooks"),
            *((e.id, company, "https://merchant.example/hooks") for e in events),
        ]
        assert len(intents) == len(events) == 2
    finally:
        treasury.close()


async def test_subscribers_hear_events_that_make_no_delivery(
    sqlite_url: str, clock: FakeClock
) -> None:
    heard: list[Event] = []

    class Subscriber:
        @hookimpl
        def treasury_event(self, event: Event) -> None:
            heard.append(event)

    pm = make_plugin_manager(plugins=[Subscriber()])
    treasury = bootstrap(
        TreasuryConfig(database_url=sqlite_url), plugins=pm, clock=clock, wall_clock=clock
    )
    try:
        _, intents = await make_events(treasury, 1, endpoint=False)
        assert await treasury.notifications.dispatch() == 1
        assert [(e.type.value, e.data["object"]["id"]) for e in heard] == [
            ("merchant_of_record.payment_intent.created", intents[0])
        ]
    finally:
        treasury.close()


async def test_an_endpoint_that_cannot_be_read_does_not_block_the_rest(
    sqlite_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    treasury = bootstrap(TreasuryConfig(database_url=sqlite_url), clock=clock, wall_clock=clock)
    try:
        broken, _ = await make_events(treasury, 1)
        healthy, _ = await make_events(treasury, 1)

        def corrupt(uow: UnitOfWork) -> None:
            # As a newer version might have stored it: an event type this code does not know.
            uow.connection.execute(  # type: ignore[attr-defined]
                text(
                    "UPDATE treasury_records SET body = json_set(body, '$.events',"
                    " json_array('merchant_of_record.unknown')) WHERE kind = 'we'"
                    " AND company_id = :company"
                ),
                {"company": broken},
            )

        await treasury.storage.run(corrupt)
        sender = CountingSender()
        treasury.notifications.sender = sender
        await treasury.notifications.run_due()
        assert await treasury.storage.run(lambda uow: uow.outbox.undispatched(10)) == []
        events = await treasury.storage.run(lambda uow: uow.outbox.list(healthy), write=False)
        assert sender.sent == Counter({e.id: 1 for e in events})
        assert "cannot be fanned out" in caplog.text
    finally:
        treasury.close()


@pytest.mark.parametrize("retention_days", [1])
async def test_retention_is_configuration(
    sqlite_url: str, clock: FakeClock, retention_days: int
) -> None:
    treasury = bootstrap(
        TreasuryConfig(database_url=sqlite_url, event_retention_days=retention_days),
        clock=clock,
        wall_clock=clock,
    )
    try:
        company, _ = await make_events(treasury, 1)
        page = await treasury.notifications.events(company, limit=10)
        assert len(page.items) == 1
        treasury.notifications.sender = CountingSender()
        await treasury.notifications.run_due()
        assert await treasury.notifications.purge_expired() == 0  # not old yet
        clock.advance(timedelta(days=retention_days, seconds=1).total_seconds())
        page = await treasury.notifications.events(company, limit=10)
        assert page.items == []
        # The worker's purge then forgets it, with its finished delivery.
        assert await treasury.notifications.purge_expired() == 1
        assert await treasury.storage.run(lambda uow: uow.outbox.list(), write=False) == []
    finally:
        treasury.close()


class GatedSender:
    """Answers ``status`` once ``gate`` opens (a worker stuck in a slow send)."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        self.started.set()
        await self.gate.wait()
        return self.status


async def test_a_worker_that_lost_its_lease_decides_nothing(
    sqlite_url: str, clock: FakeClock
) -> None:
    treasury = bootstrap(TreasuryConfig(database_url=sqlite_url), clock=clock, wall_clock=clock)
    try:
        await make_events(treasury, 1)
        await treasury.notifications.dispatch()
        real_time = FakeClock()
        slow, fast = GatedSender(500), CountingSender()
        stuck = NotificationService(
            storage=treasury.storage,
            clock=treasury.clock,
            ids=treasury.ids,
            config=treasury.config,
            vault=treasury.cards.vault,
            wall_clock=real_time,
            subscribers=partial(event_subscribers, treasury.plugins),
            sender=slow,
        )
        other = NotificationService(
            storage=treasury.storage,
            clock=treasury.clock,
            ids=treasury.ids,
            config=treasury.config,
            vault=treasury.cards.vault,
            wall_clock=real_time,
            subscribers=partial(event_subscribers, treasury.plugins),
            sender=fast,
        )
        task = asyncio.create_task(stuck.deliver_due())
        await slow.started.wait()
        real_time.advance(other.lease.total_seconds())
        assert await other.deliver_due() == 1  # took over, delivered: 200
        slow.gate.set()
        await task  # the stuck worker finally hears 500 and records it
        [event] = await treasury.storage.run(lambda uow: uow.outbox.list(), write=False)
        [delivery] = await treasury.storage.run(
            lambda uow: uow.deliveries.for_event(event.id), write=False
        )
        assert delivery.status.value == "succeeded"
        assert sorted(a.status_code or 0 for a in delivery.attempts) == [200, 500]
        assert await other.deliver_due() == 0  # nothing due again
    finally:
        treasury.close()


class BrokenSender:
    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        raise RuntimeError("a bug in the sender")


async def test_a_sender_bug_is_a_failed_attempt_retried_on_the_schedule(
    sqlite_url: str, clock: FakeClock
) -> None:
    treasury = bootstrap(TreasuryConfig(database_url=sqlite_url), clock=clock, wall_clock=clock)
    try:
        await make_events(treasury, 1)
        treasury.notifications.sender = BrokenSender()
        await treasury.notifications.run_due()  # does not raise
        [event] = await treasury.storage.run(lambda uow: uow.outbox.list(), write=False)
        [delivery] = await treasury.storage.run(
            lambda uow: uow.deliveries.for_event(event.id), write=False
        )
        assert [a.error for a in delivery.attempts] == ["sender error (RuntimeError)"]
        assert delivery.status.value == "pending"
        assert delivery.lease_until is None
        sender = CountingSender()
        treasury.notifications.sender = sender
        clock.advance(5)
        await treasury.notifications.run_due()
        assert sender.sent == Counter({event.id: 1})
    finally:
        treasury.close()


class UnreachableSender:
    """A sender that never gets an answer, as the HTTP sender reports a timeout."""

    def __init__(self) -> None:
        self.calls = 0

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        self.calls += 1
        raise DeliveryFailed("merchant.example did not answer in time")


async def test_no_answer_is_a_failed_attempt_retried_on_the_published_schedule(
    sqlite_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """``DeliveryFailed`` is the port's "no answer": each one is an attempt with no status and
    the sender's message, the next one due after the schedule's next delay, and the delivery
    fails for good after the last; it is no sender bug (nothing is logged as one)."""
    treasury = bootstrap(TreasuryConfig(database_url=sqlite_url), clock=clock, wall_clock=clock)
    try:
        await make_events(treasury, 1)
        sender = UnreachableSender()
        treasury.notifications.sender = sender
        [event] = await treasury.storage.run(lambda uow: uow.outbox.list(), write=False)

        async def delivery() -> Delivery:
            [found] = await treasury.storage.run(
                lambda uow: uow.deliveries.for_event(event.id), write=False
            )
            return found

        await treasury.notifications.run_due()
        for made, delay in enumerate(RETRY_DELAYS, start=1):
            current = await delivery()
            assert len(current.attempts) == made
            last = current.attempts[-1]
            assert (last.status_code, last.error) == (
                None,
                "merchant.example did not answer in time",
            )
            assert current.status is DeliveryStatus.PENDING
            assert current.next_attempt_at == clock.now() + delay
            assert current.lease_until is None
            # Not due a moment early; due at the delay.
            clock.advance(delay.total_seconds() - 1)
            await treasury.notifications.run_due()
            assert sender.calls == made
            clock.advance(1)
            await treasury.notifications.run_due()
        assert sender.calls == MAX_ATTEMPTS
        given_up = await delivery()
        assert given_up.status is DeliveryStatus.FAILED
        assert len(given_up.attempts) == MAX_ATTEMPTS
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    finally:
        treasury.close()


async def test_an_event_that_cannot_be_fanned_out_does_not_block_the_rest(
    sqlite_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    treasury = bootstrap(TreasuryConfig(database_url=sqlite_url), clock=clock, wall_clock=clock)
    try:
        company, _ = await make_events(treasury, 1)
        broken = Event(
            id="evt_00000000000000000000000000",  # sorts first
            type=EventType.REFUND_CREATED,
            company_id=company,
            created_at=clock.now(),
            data={"object": {"id": "re_1"}},  # no payment_intent_id: cannot be fanned out
        )
        await treasury.storage.run(lambda uow: uow.outbox.add(broken))
        sender = CountingSender()
        treasury.notifications.sender = sender
        await treasury.notifications.run_due()
        events = await treasury.storage.run(lambda uow: uow.outbox.list(company), write=False)
        assert sender.sent == Counter({e.id: 1 for e in events if e.id != broken.id})
        assert "cannot be fanned out" in caplog.text
        assert await treasury.storage.run(lambda uow: uow.outbox.undispatched(10)) == []
    finally:
        treasury.close()


async def test_private_destinations_are_refused_at_creation_outside_the_sandbox(
    sqlite_url: str, clock: FakeClock
) -> None:
    from treasury_core.errors import ValidationFailed

    treasury = bootstrap(
        TreasuryConfig(database_url=sqlite_url, allow_private_destinations=False),
        clock=clock,
        wall_clock=clock,
    )
    try:
        created = await treasury.companies.create_company("Acme")
        for url in (
            "http://127.0.0.1/hook",
            "http://127.0.0.1?x",
            "http://127.0.0.1#x",
            "http://2130706433/",
            "http://127.1/",
            "http://0x7f.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://10.0.0.5:8080/",
            "http://169.254.169.254/latest",
        ):
            with pytest.raises(ValidationFailed, match="url is refused"):
                await treasury.notifications.create_endpoint(
                    created.company.id, CreateWebhookEndpointRequest(url=url)
                )
        ok = await treasury.notifications.create_endpoint(
            created.company.id, CreateWebhookEndpointRequest(url="https://hooks.example.com/x")
        )
        assert ok.secret.startswith("whsec_")
    finally:
        treasury.close()


class HeldSender:
    """Answers 500, but only once the test lets the first send finish."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.sends = 0

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> int:
        self.sends += 1
        self.started.set()
        await self.release.wait()
        return 500


class ContendedLock(asyncio.Lock):
    """The pass lock, telling when someone asks for it while it is held."""

    def __init__(self) -> None:
        super().__init__()
        self.contended = asyncio.Event()

    async def acquire(self) -> Literal[True]:
        if self.locked():
            self.contended.set()
        return await super().acquire()


async def test_the_sandbox_clock_waits_for_a_delivery_in_flight(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Otherwise the attempt in flight is recorded after the advance, its retry is scheduled
    # from the new time, and the advance meant to reach the retry misses it.
    treasury = bootstrap(TreasuryConfig(database_url="memory://"), clock=clock, wall_clock=clock)
    sender = HeldSender()
    treasury.notifications.sender = sender
    await make_events(treasury, 1)
    before = clock.now()

    lock = ContendedLock()
    monkeypatch.setattr(treasury.notifications, "exclusive", lambda: lock)

    worker = asyncio.create_task(treasury.notifications.run_due())
    await sender.started.wait()
    advance = asyncio.create_task(treasury.sandbox.advance(RETRY_DELAYS[0].seconds))
    # The advance reaches the pass lock the worker holds (a deadline only for the failure).
    await asyncio.wait_for(lock.contended.wait(), 30)
    assert not advance.done()
    assert clock.now() == before

    sender.release.set()
    await worker
    await advance
    # The first attempt failed at `before`; its retry fell due within the advance and was sent.
    assert sender.sends == 2
