"""The background loop: due jobs (settlements, payouts, hold expiry, questions to the card
provider about lost answers), card reconciliation, event deliveries, and the purge of old
idempotency records and events. ``treasury serve`` runs it beside the HTTP server;
``treasury worker`` runs it alone, and several of them may share one PostgreSQL database
(jobs and deliveries are claimed row by row)."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable

from treasury_aiohttp.notifier import HttpSender
from treasury_aiohttp.settings import app_settings
from treasury_core import Treasury
from treasury_core.ports import background_writes

log = logging.getLogger("treasury.jobs")

# Idempotency records past their retention window are deleted this often (wall time).
_PURGE_EVERY_SECONDS = 600.0

# How long the loop lets commits gather after a wake-up before it fans them out (wall time).
_GATHER_SECONDS = 0.01


class BacklogWatch:
    """Warns in the log when the oldest undelivered event is older than ``threshold_seconds``
    (``TREASURY_EVENT_BACKLOG_WARNING_SECONDS``), and says when it is no longer.

    The backlog is read at most every ``check_every`` seconds, not on every poll, and while it
    stays old the warning is repeated at most every ``warn_every`` seconds: an operator learns
    of a stuck pipeline without a line per second. ``monotonic`` is the clock both are measured
    on (real time; a test passes its own).
    """

    def __init__(
        self,
        threshold_seconds: float,
        *,
        check_every: float = 10.0,
        warn_every: float = 300.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold_seconds
        self._check_every = check_every
        self._warn_every = warn_every
        self._monotonic = monotonic
        self._next_check: float | None = None
        self._warned_at: float | None = None

    async def check(self, treasury: Treasury) -> None:
        """Read the backlog if a check is due, and log what changed."""
        if self.threshold <= 0:
            return
        now = self._monotonic()
        if self._next_check is not None and now < self._next_check:
            return
        self._next_check = now + self._check_every
        status = await treasury.notifications.status()
        age = status.oldest_undelivered_age_seconds
        if age is not None and age > self.threshold:
            if self._warned_at is None or now - self._warned_at >= self._warn_every:
                self._warned_at = now
                log.warning(
                    "event backlog: the oldest undelivered event is %.0f s old (threshold "
                    "%.0f s); %d events not fanned out, %d deliveries pending (%d due), "
                    "%d failing endpoints; see `treasury events status`",
                    age,
                    self.threshold,
                    status.undispatched_events,
                    status.pending_deliveries,
                    status.due_deliveries,
                    len(status.failing),
                )
        elif self._warned_at is not None:
            self._warned_at = None
            log.info(
                "event backlog recovered: the oldest undelivered event is %s",
                "none" if age is None else f"{age:.0f} s old",
            )


async def work_loop(
    treasury: Treasury,
    stop: asyncio.Event,
    *,
    after_pass: Callable[[], None] | None = None,
    watch: BacklogWatch | None = None,
) -> None:
    """Look for due work until ``stop`` is set: a whole pass (jobs, fan-out, purges) every
    ``config.job_poll_seconds``, and a fan-out as soon as this process commits events
    (``NotificationService.wake``). Deliveries go out from their own loop beside it
    (``NotificationService.keep_delivering``), batch after batch.

    ``after_pass`` is called after each whole pass, before the wait for the next (a test
    harness learns from it that jobs and fan-out due at start have been done). ``watch`` checks
    the event backlog after each whole pass (one on the ``event_backlog_warning_seconds``
    setting by default).

    The batches in flight finish before the loop ends, so a delivery being sent is recorded
    (its claim released) rather than left to its lease; a backlog left behind is the next
    start's (or another worker's) work.
    """
    notifications = treasury.notifications
    poll = treasury.config.job_poll_seconds
    with background_writes():  # the task keeps the context it was created in
        delivering = asyncio.create_task(notifications.keep_delivering(stop), name="deliveries")
    next_pass = next_purge = 0.0
    if watch is None:
        watch = BacklogWatch(app_settings(treasury.config).event_backlog_warning_seconds)
    try:
        while not stop.is_set():
            whole = time.monotonic() >= next_pass
            try:
                # Kept off the event loop by storages that can (a purge may take a while).
                with background_writes():
                    if whole:
                        # Business time as another process may have advanced it (the sandbox
                        # clock's offset is kept in the database), so what it made due is
                        # done now.
                        await treasury.sandbox.sync_clock()
                        await treasury.jobs.run_all_due(stopping=stop.is_set)
                        if not stop.is_set():
                            # Once per period between all workers (the run's time is stored).
                            await treasury.card_reconciliation.run_if_due()
                    await notifications.dispatch_all(stopping=stop.is_set)
                    if whole and time.monotonic() >= next_purge and not stop.is_set():
                        await treasury.idempotency.purge_expired()
                        await notifications.purge_expired()
                        next_purge = time.monotonic() + _PURGE_EVERY_SECONDS
                    if whole and not stop.is_set():
                        await watch.check(treasury)
            except Exception:
                log.exception("background work failed; retrying")
            if whole:
                next_pass = time.monotonic() + poll
                if after_pass is not None:
                    after_pass()
            # Until the next whole pass, new events (a fan-out only), or shutdown.
            await notifications.wait_for_events(stop, max(0.0, next_pass - time.monotonic()))
            if not stop.is_set():
                # Commits come in bursts: a few milliseconds gather them into one fan-out
                # rather than a transaction per request beside the requests' own.
                await asyncio.sleep(_GATHER_SECONDS)
    finally:
        await delivering


async def run_worker(treasury: Treasury, *, started: Callable[[], None] | None = None) -> None:
    """``treasury worker``: the loop with an HTTP sender, until SIGINT or SIGTERM.

    ``started`` is called once those signals stop the loop gracefully (the command prints its
    "worker on" line then, so that a supervisor that sees it may signal at once).
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if started is not None:
        started()
    async with HttpSender.for_config(treasury.config) as sender:
        if treasury.notifications.sender is None:
            treasury.notifications.sender = sender
        await work_loop(treasury, stop)
