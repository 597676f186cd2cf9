"""The job runner: runs the jobs that fall due on the clock, each by the handler of its kind.

The services that schedule jobs register a handler per kind (settlement its settlements, the
payments service its expiries, payouts and provider resolutions); a due job of a kind nobody
registered is retired with a warning.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from treasury_core.jobs import Job
from treasury_core.ports import Clock, Storage, UnitOfWork

log = logging.getLogger("treasury.settlement")

#: A job's work: lock what the job is about, claim the job (``uow.jobs.claim``; ``False`` when
#: another runner holds it or it is done), do the work and finish the job, all in ``uow``.
JobHandler = Callable[[UnitOfWork, Job], bool]

#: A job whose work calls out (a card provider): awaited outside any transaction, it does the
#: call and then claims and finishes the job in a transaction of its own; ``False`` when it was
#: not the one to finish it. Two runners may both do the call before one claims the job, so
#: the work must be safe to repeat (at least once, not exactly once).
OutsideJobHandler = Callable[[Job], Awaitable[bool]]


class JobRunner:
    """Runs due jobs, each kind by the handler registered for it."""

    def __init__(self, *, storage: Storage, clock: Clock) -> None:
        self._storage = storage
        self._clock = clock
        self._handlers: dict[str, JobHandler] = {}
        self._outside: dict[str, OutsideJobHandler] = {}

    def register(self, kind: str, handler: JobHandler) -> None:
        """Run ``handler`` for due jobs of ``kind``, in a transaction of its own per job."""
        self._handlers[kind] = handler

    def register_all(self, handlers: Mapping[str, JobHandler]) -> None:
        """:meth:`register` each kind → handler of ``handlers``."""
        self._handlers.update(handlers)

    def register_outside(self, kind: str, handler: OutsideJobHandler) -> None:
        """Await ``handler`` for due jobs of ``kind``, outside any transaction (its work calls
        out and must not hold a transaction open meanwhile)."""
        self._outside[kind] = handler

    def _unknown(self, uow: UnitOfWork, job: Job) -> bool:
        log.warning("no handler for job kind %s; retiring job %s", job.kind, job.id)
        if uow.jobs.claim(job.id) is None:
            return False
        uow.jobs.finish(job.id)
        return True

    async def run_due(self, limit: int = 100) -> int:
        """Run up to ``limit`` due jobs, each in its own transaction; how many ran.

        Jobs registered with :meth:`register_outside` run last, all at once: a slow provider
        then delays the batch by one call's time, not by one per job, and never the
        transactional jobs (an expiry) of the batch.
        """
        now = self._clock.now()
        due = await self._storage.run(lambda uow: uow.jobs.due(now, limit), write=False)
        ran = 0
        outside: list[tuple[Job, OutsideJobHandler]] = []
        for job in due:
            if job.kind in self._outside:
                outside.append((job, self._outside[job.kind]))
                continue
            handler = self._handlers.get(job.kind, self._unknown)

            def run(uow: UnitOfWork, job: Job = job, handler: JobHandler = handler) -> bool:
                return handler(uow, job)

            try:
                ran += await self._storage.run(run)
            except Exception:
                # One job that cannot run must not hold up every later one; it stays pending
                # and is tried again on the next pass.
                log.exception("running %s %s failed", job.kind, job.resource_id)
        calls = (work(job) for job, work in outside)
        results = await asyncio.gather(*calls, return_exceptions=True)
        for (job, _), result in zip(outside, results, strict=True):
            if isinstance(result, BaseException):
                log.error("running %s %s failed", job.kind, job.resource_id, exc_info=result)
            else:
                ran += result
        return ran

    async def run_all_due(
        self, batch: int = 100, *, stopping: Callable[[], bool] = lambda: False
    ) -> int:
        """Run everything due now, pass after pass (a job may schedule another that is due
        already, e.g. a payout behind a capture the clock advanced past); how many ran.

        ``stopping`` is asked between batches: once it answers true the batch in progress is
        the last, so a shutdown waits for at most ``batch`` jobs, not for a whole backlog.
        """
        total = 0
        while True:
            ran = await self.run_due(batch)
            total += ran
            if ran == 0 or stopping():
                return total
