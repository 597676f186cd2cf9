"""The background loop: due jobs (settlements, payouts, hold expiry), event deliveries, and the
purge of old idempotency records and events. ``treasury serve`` runs it beside the HTTP server;
``treasury worker`` runs it alone, and several of them may share one PostgreSQL database
(jobs and deliveries are claimed row by row)."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable

from treasury_aiohttp.notifier import HttpSender
from treasury_core import Treasury
from treasury_core.ports import background_writes

log = logging.getLogger("treasury.jobs")

# Idempotency records past their retention window are deleted this often (wall time).
_PURGE_EVERY_SECONDS = 600.0

# How long the loop lets commits gather after a wake-up before it fans them out (wall time).
_GATHER_SECONDS = 0.01


async def work_loop(
    treasury: Treasury, stop: asyncio.Event, *, after_pass: Callable[[], None] | None = None
) -> None:
    """Look for due work until ``stop`` is set: a whole pass (jobs, fan-out, purges) every
    ``config.job_poll_seconds``, and a fan-out as soon as this process commits events
    (``NotificationService.wake``). Deliveries go out from their own loop beside it
    (``NotificationService.keep_delivering``), batch after batch.

    ``after_pass`` is called after each whole pass, before the wait for the next (a test
    harness learns from it that jobs and fan-out due at start have been done).

    The batches in flight finish before the loop ends, so a delivery being sent is recorded
    (its claim released) rather than left to its lease; a backlog left behind is the next
    start's (or another worker's) work.
    """
    notifications = treasury.notifications
    poll = treasury.config.job_poll_seconds
    with background_writes():  # the task keeps the context it was created in
        delivering = asyncio.create_task(notifications.keep_delivering(stop), name="deliveries")
    next_pass = next_purge = 0.0
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
                        await treasury.settlement.run_all_due(stopping=stop.is_set)
                    await notifications.dispatch_all(stopping=stop.is_set)
                    if whole and time.monotonic() >= next_purge and not stop.is_set():
                        await treasury.idempotency.purge_expired()
                        await notifications.purge_expired()
                        next_purge = time.monotonic() + _PURGE_EVERY_SECONDS
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


async def run_worker(treasury: Treasury) -> None:
    """``treasury worker``: the loop with an HTTP sender, until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with HttpSender.for_config(treasury.config) as sender:
        if treasury.notifications.sender is None:
            treasury.notifications.sender = sender
        await work_loop(treasury, stop)
