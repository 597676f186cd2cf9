"""The outbox dispatcher: events fanned out into deliveries, deliveries signed and sent.

Events are written to the outbox in the transaction of the change they report. From there:

1. **Fan-out** (:meth:`Dispatcher.dispatch`): in one transaction, take events not yet
   dispatched (on PostgreSQL each dispatcher skips rows another holds), create their
   deliveries (webhook endpoints, the legacy callback, the PMTI callback) and mark them
   dispatched. In-process subscribers (the ``treasury_event`` hook) hear of them after commit,
   in the process that did the fan-out (at most once: a crash right after the commit loses
   them for subscribers, never for deliveries).
2. **Delivery** (:meth:`Dispatcher.deliver_due`): claim due deliveries under a lease
   (wall time), post them outside any transaction, then record the attempt and either finish
   the delivery or schedule the next attempt on the published schedule (business time).

So every event is delivered at least once, each attempt by one worker at a time, and a worker
killed mid-send only delays its deliveries until its lease runs out.

Signing follows Standard Webhooks: ``webhook-id`` is the event id, ``webhook-timestamp`` the
real time of the attempt, ``webhook-signature`` ``v1,<base64 HMAC-SHA256>`` under the endpoint's
secret (webhooks) or the company's callback secret (legacy and PMTI callbacks). Secrets are
derived by the vault and never stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from standardwebhooks import Webhook

from treasury_core.cards.tokens import TokenizationResult
from treasury_core.config import TreasuryConfig
from treasury_core.notifications.deliveries import (
    Delivery,
    DeliveryAttempt,
    DeliveryKind,
    DeliveryStatus,
)
from treasury_core.notifications.endpoints import WebhookEndpoint
from treasury_core.notifications.events import Event, EventHead, EventType
from treasury_core.notifications.schedule import next_attempt_at
from treasury_core.notifications.status import DeliveryBacklog, OutboxBacklog, PipelineStatus
from treasury_core.payments.payloads import (
    LEGACY_CALLBACK_TYPES,
    intent_from_webhook_object,
    legacy_callback_body,
    legacy_callback_url,
)
from treasury_core.ports import Clock, DeliveryFailed, IdSource, Storage, UnitOfWork, WebhookSender
from treasury_core.services.notifications.endpoints import WebhookSecrets, all_endpoints

log = logging.getLogger("treasury.notifications")

#: The window of real time :meth:`Dispatcher.status` measures the delivery rate over.
RATE_WINDOW_SECONDS = 60

#: Events whose PMTI ``callback_url`` gets the tokenization result.
TOKENIZATION_EVENTS = frozenset(
    {
        EventType.PAYMENT_METHOD_TOKEN_INTENT_SUCCEEDED,
        EventType.PAYMENT_METHOD_TOKEN_INTENT_FAILED,
    }
)

#: The signers of one destination's deliveries (see :meth:`Dispatcher._signers`).
_Signers = tuple[Webhook, ...]


def webhook_payload(event: Event) -> str:
    """The body of a webhook: ``{"id", "type", "created", "data": {"object": …}}``."""
    return json.dumps(
        {
            "id": event.id,
            "type": event.type.value,
            "created": event.created_at.astimezone(UTC).isoformat(),  # as the events API
            "data": event.data,
        },
        separators=(",", ":"),
    )


class _Bell:
    """A wake-up call for a loop waiting in any event loop of this process, rung from any
    thread (asyncio only: an :class:`asyncio.Event` per loop, set through that loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = (
            weakref.WeakKeyDictionary()
        )

    def ring(self) -> None:
        with self._lock:
            waiting = [(loop, e) for loop, e in self._events.items() if not e.is_set()]
        if not waiting:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, event in waiting:
            if loop is running:
                event.set()
            else:
                with contextlib.suppress(RuntimeError):  # that loop has closed meanwhile
                    loop.call_soon_threadsafe(event.set)

    async def wait(self, stop: asyncio.Event, seconds: float) -> None:
        """Until rung (since the last wait returned), ``stop`` is set, or ``seconds`` pass."""
        loop = asyncio.get_running_loop()
        with self._lock:
            event = self._events.get(loop)
            if event is None:
                event = self._events[loop] = asyncio.Event()
        if not event.is_set() and not stop.is_set():
            waiters = {asyncio.ensure_future(event.wait()), asyncio.ensure_future(stop.wait())}
            try:
                await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        # Cleared before the caller looks for work: a ring from now on means work it may miss.
        event.clear()


class Dispatcher:
    """Fans the outbox out into deliveries and sends them (see the module)."""

    def __init__(
        self,
        *,
        storage: Storage,
        clock: Clock,
        ids: IdSource,
        wall_clock: Clock,
        secrets: WebhookSecrets,
        config: TreasuryConfig,
        subscribers: Callable[[], Sequence[tuple[str, Callable[..., Any]]]] | None = None,
        sender: WebhookSender | None = None,
    ) -> None:
        """``config`` gives the delivery settings (``delivery_*``, ``job_poll_seconds``)."""
        self._storage = storage
        self._clock = clock
        self._ids = ids
        self._wall = wall_clock
        self._secrets = secrets
        self._config = config
        self._subscribers = subscribers
        self.sender = sender
        #: How long a worker holds a claimed delivery (real time): longer than a send can take.
        self.lease = timedelta(seconds=config.delivery_lease_seconds)
        # One per event loop: an asyncio.Lock belongs to the loop it first waits on, and a
        # treasury may be driven from more than one loop over its life (asyncio.run per call).
        self._pass_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        # Events committed in this process (wake()), and deliveries due or slots freed.
        self._events_bell = _Bell()
        self._due_bell = _Bell()
        # Sends in flight in this process, in all and per destination (the claim's room).
        self._sending = 0
        self._sending_to: dict[str, int] = {}
        self._batches: set[asyncio.Task[None]] = set()

    # --- fan-out ------------------------------------------------------------------------------

    def deliveries(
        self,
        uow: UnitOfWork,
        event: Event,
        endpoints: dict[int, list[WebhookEndpoint]] | None = None,
    ) -> Iterable[Delivery]:
        """The deliveries ``event`` makes; ``endpoints`` caches each company's endpoints for
        one batch (one query per company, not per event)."""
        now = self._clock.now()

        def delivery(kind: DeliveryKind, url: str, payload: str, endpoint: str | None) -> Delivery:
            return Delivery(
                id=self._ids.new_id(Delivery.prefix),
                company_id=event.company_id,
                event_id=event.id,
                event_type=event.type.value,
                kind=kind,
                endpoint_id=endpoint,
                url=url,
                payload=payload,
                next_attempt_at=now,
                created_at=now,
            )

        cache = {} if endpoints is None else endpoints
        if event.company_id not in cache:
            cache[event.company_id] = all_endpoints(uow, event.company_id)
        body: str | None = None  # rendered once, and only for an event some endpoint takes
        for endpoint in cache[event.company_id]:
            if endpoint.takes(event.type):
                body = webhook_payload(event) if body is None else body
                yield delivery(DeliveryKind.WEBHOOK, endpoint.url, body, endpoint.id)
        obj: dict[str, Any] = event.data.get("object", {})
        if event.type in LEGACY_CALLBACK_TYPES:
            intent = None
            if event.type is EventType.REFUND_CREATED:
                stored = uow.intents.get(int(obj["payment_intent_id"]), event.company_id)
                intent = stored
            elif obj.get("callback_url"):  # most intents have none: nothing to rebuild
                intent = intent_from_webhook_object(obj)
            legacy = legacy_callback_body(event.type, intent) if intent is not None else None
            if intent is not None and intent.callback_url and legacy is not None:
                yield delivery(
                    DeliveryKind.LEGACY_CALLBACK,
                    legacy_callback_url(intent.callback_url),
                    json.dumps(legacy, separators=(",", ":")),
                    None,
                )
        if event.type in TOKENIZATION_EVENTS and obj.get("callback_url"):
            result = TokenizationResult.from_event_object(obj)
            yield delivery(
                DeliveryKind.TOKENIZATION_CALLBACK,
                obj["callback_url"],
                result.model_dump_json(),
                None,
            )

    def _read_whole(
        self, uow: UnitOfWork, head: EventHead, endpoints: dict[int, list[WebhookEndpoint]]
    ) -> bool:
        """Whether the event may make a delivery, so its payload must be read: a callback type
        (whether it goes depends on the payload's ``callback_url``) or a type some enabled
        endpoint of its company takes. ``endpoints`` caches each company's for one batch.

        True as well when the endpoints cannot be read (a stored endpoint this code does not
        understand): the event then meets the same failure in the fan-out's own guard, which
        logs it and goes on with the rest.
        """
        if head.type in LEGACY_CALLBACK_TYPES or head.type in TOKENIZATION_EVENTS:
            return True
        try:
            if head.company_id not in endpoints:
                endpoints[head.company_id] = all_endpoints(uow, head.company_id)
        except Exception:
            return True
        return any(endpoint.takes(head.type) for endpoint in endpoints[head.company_id])

    async def dispatch(self, limit: int = 500) -> int:
        """Fan out up to ``limit`` undispatched events into deliveries; how many.

        Only the events that may make a delivery (or all of them, for ``treasury_event``
        subscribers) are read whole: most make none, and reading and parsing every payload on
        the writer's thread took a large share of a busy server's CPU per create.
        """
        subscribers = [] if self._subscribers is None else self._subscribers()

        def write(uow: UnitOfWork) -> tuple[int, list[Event], int]:
            heads = uow.outbox.undispatched_heads(limit)
            endpoints: dict[int, list[WebhookEndpoint]] = {}
            wanted = [h.id for h in heads if subscribers or self._read_whole(uow, h, endpoints)]
            events = uow.outbox.get_many(wanted) if wanted else []
            added = 0
            for event in events:
                try:
                    # Built before any is added, so an event that cannot be fanned out adds
                    # nothing; it is logged and marked, not retried forever in front of the rest.
                    made = list(self.deliveries(uow, event, endpoints))
                except Exception:
                    log.exception("event %s (%s) cannot be fanned out", event.id, event.type)
                    continue
                for delivery in made:
                    uow.deliveries.add(delivery)
                added += len(made)
            uow.outbox.mark_dispatched([h.id for h in heads], self._wall.now())
            return len(heads), events, added

        dispatched, events, added = await self._storage.run(write)
        if added:
            self._due_bell.ring()  # the delivery loop need not wait for its poll
        # Each subscriber on its own: one that raises must not silence the others.
        for event in events if subscribers else ():
            for name, call in subscribers:
                try:
                    call(event=event)
                except Exception:
                    log.exception("treasury_event subscriber %s failed on %s", name, event.id)
        return dispatched

    # --- delivery -----------------------------------------------------------------------------

    def wake(self) -> None:
        """Say that events were committed: this process's worker loop fans them out and sends
        them now rather than at its next poll. Safe from any thread, and cheap: the HTTP app
        calls it after every request that may have written (an embedding application that
        writes through the services directly may call it too; otherwise the poll finds them).
        """
        self._events_bell.ring()

    def wake_deliveries(self) -> None:
        """Say that deliveries are due: the delivery loop claims them now (thread-safe)."""
        self._due_bell.ring()

    async def wait_for_events(self, stop: asyncio.Event, seconds: float) -> None:
        """Wait until :meth:`wake` is called, ``stop`` is set or ``seconds`` pass."""
        await self._events_bell.wait(stop, seconds)

    async def deliver_due(self, limit: int | None = None) -> int:
        """Claim one batch of due deliveries (up to ``limit``, ``delivery_batch_size`` by
        default, within the limits on sends in flight), send them concurrently and record
        them; how many were claimed. Returns once the batch is recorded.

        One claim transaction and one record transaction per batch, and one read of the
        batch's webhook endpoints for their secrets: the per-delivery cost is the send.
        """
        batch = await self._claim(limit)
        if batch:
            await self._send_batch(batch)
        return len(batch)

    async def keep_delivering(self, stop: asyncio.Event) -> None:
        """The delivery loop of a worker, until ``stop`` is set: claim a batch whenever sends
        may start (room under the limits in flight) and due deliveries are there; each batch
        is sent and recorded on its own, so a slow receiver in one does not hold up the next
        claim. Waits for a fan-out in this process (or a send finishing) to say more is due,
        and looks anyway every ``job_poll_seconds`` for what other processes committed.

        Batches in flight when ``stop`` is set finish (and are recorded) before this returns.
        """
        poll = self._config.job_poll_seconds
        try:
            while not stop.is_set():
                try:
                    # Claims and the sandbox clock's advance take turns (see exclusive()).
                    async with self.exclusive():
                        batch = await self._claim(None)
                except Exception:
                    log.exception("claiming deliveries failed; retrying")
                    batch = []
                if batch:
                    task = asyncio.create_task(self._send_batch(batch))
                    self._batches.add(task)
                    task.add_done_callback(self._batches.discard)
                    continue
                await self._due_bell.wait(stop, poll)
        finally:
            await self.finish_in_flight()

    async def finish_in_flight(self) -> None:
        """Wait until the batches :meth:`keep_delivering` started on this event loop are
        recorded (each is bounded by the send timeout)."""
        loop = asyncio.get_running_loop()
        mine = [t for t in self._batches if t.get_loop() is loop]
        if mine:
            await asyncio.gather(*mine, return_exceptions=True)

    async def _claim(self, limit: int | None) -> list[Delivery]:
        config = self._config
        if self.sender is None:
            return []
        size = min(
            config.delivery_batch_size if limit is None else limit,
            config.delivery_concurrency - self._sending,
        )
        if size <= 0:
            return []
        per_destination = config.delivery_concurrency_per_destination
        room = {d: per_destination - n for d, n in self._sending_to.items()}
        now, wall = self._clock.now(), self._wall.now()
        claimed = await self._storage.run(
            lambda uow: uow.deliveries.claim_batch(
                now, wall, wall + self.lease, size, per_destination=per_destination, room=room
            )
        )
        for delivery in claimed:
            self._sending += 1
            destination = delivery.destination
            self._sending_to[destination] = self._sending_to.get(destination, 0) + 1
        return claimed

    def _sent(self, delivery: Delivery) -> None:
        # Its slot is free once the receiver answered (or did not): recording waits for the
        # batch, sending need not. The delivery loop is woken when half of a destination's
        # (or all) slots are free, not at every answer: a claim per answer would make batches
        # of one.
        config = self._config
        self._sending -= 1
        left = self._sending_to[delivery.destination] - 1
        if left:
            self._sending_to[delivery.destination] = left
        else:
            del self._sending_to[delivery.destination]
        if (
            left in (0, config.delivery_concurrency_per_destination // 2)
            or self._sending == config.delivery_concurrency // 2
        ):
            self._due_bell.ring()

    async def _send_batch(self, batch: list[Delivery]) -> None:
        sender = self.sender
        pending = list(batch)
        attempts: list[DeliveryAttempt] = []
        try:
            signers = await self._signers(batch)
            assert sender is not None  # _claim claims nothing without one
            attempts = await asyncio.gather(
                *(self._attempt(sender, d, signers, pending) for d in batch)
            )
            await self._storage.run(lambda uow: self._record(uow, batch, attempts))
        except Exception:
            # Storage trouble: the leases run out and the deliveries are tried again.
            log.exception("a batch of %d deliveries could not be sent or recorded", len(batch))
            return
        finally:
            for delivery in pending:  # never sent (their signers could not be read)
                self._sent(delivery)
        for delivery, attempt in zip(batch, attempts, strict=True):
            if attempt.error is not None:
                log.info(
                    "delivery %s of %s failed: %s", delivery.id, delivery.event_id, attempt.error
                )

    async def _signers(self, batch: list[Delivery]) -> dict[tuple[str, str | int], _Signers]:
        """The signers each destination of the batch needs (two for an endpoint whose secret
        was rotated, within the overlap): endpoints read in one transaction, secrets derived
        once each. An endpoint that cannot be found has none (its attempt fails)."""
        endpoints = {
            (d.endpoint_id, d.company_id)
            for d in batch
            if d.kind is DeliveryKind.WEBHOOK and d.endpoint_id is not None
        }
        found: list[WebhookEndpoint] = []
        if endpoints:

            def read(uow: UnitOfWork) -> list[WebhookEndpoint]:
                got = (uow.records.get(WebhookEndpoint, e, c) for e, c in endpoints)
                return [e for e in got if e is not None]

            found = await self._storage.run(read, write=False)
        now = self._clock.now()
        signers: dict[tuple[str, str | int], _Signers] = {
            ("endpoint", e.id): tuple(
                Webhook(self._secrets.endpoint_secret(e, salt)) for salt in e.signing_salts(now)
            )
            for e in found
        }
        for company_id in {d.company_id for d in batch if self._signed_by_company(d)}:
            signers["company", company_id] = (Webhook(self._secrets.callback_secret(company_id)),)
        return signers

    @staticmethod
    def _signed_by_company(delivery: Delivery) -> bool:
        return delivery.kind is not DeliveryKind.WEBHOOK or delivery.endpoint_id is None

    async def _attempt(
        self,
        sender: WebhookSender,
        delivery: Delivery,
        signers: dict[tuple[str, str | int], _Signers],
        pending: list[Delivery],
    ) -> DeliveryAttempt:
        attempted_at = self._wall.now()
        # Whole seconds, in UTC: what the header says is exactly what was signed.
        timestamp = datetime.fromtimestamp(int(attempted_at.timestamp()), UTC)
        started = time.monotonic()
        status: int | None = None
        error: str | None = None
        try:
            if self._signed_by_company(delivery):
                signer = signers["company", delivery.company_id]
            else:
                found = signers.get(("endpoint", delivery.endpoint_id or ""))
                if found is None:  # endpoints are marked deleted, never removed
                    raise LookupError(f"webhook endpoint {delivery.endpoint_id} is missing")
                signer = found
            # Standard Webhooks: several signatures, space-separated; any one may verify.
            signature = " ".join(
                s.sign(delivery.event_id, timestamp, delivery.payload) for s in signer
            )
            headers = {
                "Content-Type": "application/json",
                "webhook-id": delivery.event_id,
                "webhook-timestamp": str(int(timestamp.timestamp())),
                "webhook-signature": signature,
            }
            status = await sender.send(delivery.url, delivery.payload.encode(), headers)
            if not 200 <= status < 300:
                error = f"HTTP {status}"
        except DeliveryFailed as exc:
            error = str(exc) or type(exc).__name__
        except Exception as exc:
            # A sender's bug is one failed attempt, retried on the schedule like any other;
            # never a delivery stuck behind a lease forever. (No URL in the log: it may carry
            # the receiver's token.)
            log.exception("delivery %s: the sender failed", delivery.id)
            error = f"sender error ({type(exc).__name__})"
        finally:
            pending.remove(delivery)
            self._sent(delivery)
        return DeliveryAttempt(
            attempted_at=attempted_at,
            status_code=status,
            duration_ms=int((time.monotonic() - started) * 1000),
            error=error,
        )

    def _record(
        self, uow: UnitOfWork, batch: list[Delivery], attempts: list[DeliveryAttempt]
    ) -> None:
        """Record a batch's attempts in one transaction: each delivery done, failed for good,
        or due again on the published schedule (from the business time of the record).

        Decided on the claimed copies, written where the stored delivery is still as the claim
        left it (the common case, in one statement); the others are decided again on what
        is stored now."""
        now = self._clock.now()

        def after(delivery: Delivery, attempt: DeliveryAttempt) -> Delivery:
            failed = attempt.error is not None
            next_at = next_attempt_at(len(delivery.attempts) + 1, now) if failed else None
            return delivery.attempted(attempt, succeeded=not failed, next_at=next_at)

        outcome = {d.id: a for d, a in zip(batch, attempts, strict=True)}
        changed = uow.deliveries.record_attempts(
            [(delivery, after(delivery, outcome[delivery.id])) for delivery in batch]
        )
        for delivery in changed:
            attempt = outcome[delivery.id]
            current = uow.deliveries.get(delivery.id, for_update=True)
            if current is None:
                continue
            if current.status is not DeliveryStatus.PENDING or (
                current.lease_until != delivery.lease_until
            ):
                # Our lease ran out and another worker took the delivery over (and may have
                # finished it): keep the attempt for the record, decide nothing.
                uow.deliveries.update(current.noted(attempt))
                continue
            uow.deliveries.update(after(current, attempt))

    async def run_due(
        self, batch: int = 500, *, stopping: Callable[[], bool] = lambda: False
    ) -> None:
        """Fan out every undispatched event, then send every due delivery.

        Sending goes ahead even when the fan-out failed (storage trouble): what is already
        due must not wait for it. ``stopping`` is asked between batches: once it answers true
        the batch in progress is the last, so a shutdown does not wait for a whole backlog.

        Passes in one process and event loop run one at a time (see :meth:`exclusive`).
        """
        async with self.exclusive():
            await self.run_due_exclusively(batch, stopping=stopping)

    def exclusive(self) -> asyncio.Lock:
        """The lock a pass over due deliveries (and each claim of the delivery loop) holds,
        for this event loop.

        The sandbox clock takes it to advance, and then waits for the batches in flight
        (:meth:`finish_in_flight`): an attempt in progress is recorded before time moves, so
        its retry is scheduled from the old time and an advance past the retry delay sends it
        (otherwise the retry would be scheduled from the new time and missed).
        """
        loop = asyncio.get_running_loop()
        lock = self._pass_locks.get(loop)
        if lock is None:
            lock = self._pass_locks[loop] = asyncio.Lock()
        return lock

    async def dispatch_all(
        self, batch: int = 500, *, stopping: Callable[[], bool] = lambda: False
    ) -> None:
        """Fan out every undispatched event (``stopping`` asked between batches)."""
        while await self.dispatch(batch) == batch and not stopping():
            pass

    async def run_due_exclusively(
        self, batch: int = 500, *, stopping: Callable[[], bool] = lambda: False
    ) -> None:
        """:meth:`run_due` for a caller already holding :meth:`exclusive`.

        Batches the delivery loop already had in flight are recorded before it returns (the
        loop claims no more meanwhile), so every delivery due when it was called has been
        attempted and recorded by then.
        """
        try:
            await self.dispatch_all(batch, stopping=stopping)
        finally:
            while not stopping() and await self.deliver_due():
                pass
            await self.finish_in_flight()

    async def status(self) -> PipelineStatus:
        """The pipeline's backlog, its oldest undelivered event, its delivery rate and its
        failing endpoints (``treasury events status``; docs/notifications.md).

        One read-only transaction over the unfinished rows (see :class:`PipelineStatus`); the
        rate counts deliveries attempted in the last :data:`RATE_WINDOW_SECONDS` of real time.
        """
        now, wall = self._clock.now(), self._wall.now()
        since = wall - timedelta(seconds=RATE_WINDOW_SECONDS)

        def read(uow: UnitOfWork) -> tuple[OutboxBacklog, DeliveryBacklog]:
            return uow.outbox.backlog(), uow.deliveries.backlog(now, since)

        events, deliveries = await self._storage.run(read, write=False)
        waiting = [t for t in (events.oldest_created_at, deliveries.oldest_event_created_at) if t]
        return PipelineStatus(
            as_of=now,
            undispatched_events=events.undispatched,
            pending_deliveries=deliveries.pending,
            due_deliveries=deliveries.due,
            oldest_undelivered_at=min(waiting, default=None),
            deliveries_per_second=deliveries.attempted_recently / RATE_WINDOW_SECONDS,
            rate_window_seconds=RATE_WINDOW_SECONDS,
            failing=deliveries.failing,
        )
