"""Settling movements: completing or failing a pending deposit, withdrawal or transfer.

One function serves every path that settles (the sandbox controls, the rail's schedule run by
the job runner): it locks the record, refuses one that is no longer pending, posts or voids the
record's pending ledger legs in one journal, updates the record, writes the event, and retires
the record's scheduled job, all in the caller's transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast

from treasury_core.errors import InvalidRequestError, NotFound, ValidationFailed
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.jobs import Job
from treasury_core.ledger import Journal, Leg, PostPending, VoidPending
from treasury_core.money import convert
from treasury_core.movements.ledger import completed_deposit_legs
from treasury_core.movements.records import (
    Deposit,
    MovementError,
    Transfer,
    Withdrawal,
)
from treasury_core.movements.states import MovementTrigger, next_status, settleable
from treasury_core.notifications.events import EventType
from treasury_core.ports import Settlement, UnitOfWork
from treasury_core.services.idempotency import finish
from treasury_core.services.support import TreasuryContext, require_id

M = TypeVar("M", bound=Deposit | Withdrawal | Transfer)

log = logging.getLogger("treasury.settlement")


@dataclass(frozen=True, slots=True)
class _Kind:
    noun: str
    job: str
    completed: EventType
    failed: EventType


KINDS: Mapping[str, _Kind] = {
    Deposit.prefix: _Kind(
        "deposit", "settle_deposit", EventType.DEPOSIT_COMPLETED, EventType.DEPOSIT_FAILED
    ),
    Withdrawal.prefix: _Kind(
        "withdrawal",
        "settle_withdrawal",
        EventType.WITHDRAWAL_COMPLETED,
        EventType.WITHDRAWAL_FAILED,
    ),
    Transfer.prefix: _Kind(
        "transfer", "settle_transfer", EventType.TRANSFER_COMPLETED, EventType.TRANSFER_FAILED
    ),
}
JOB_KINDS: Mapping[str, type[Deposit | Withdrawal | Transfer]] = {
    KINDS[t.prefix].job: t for t in (Deposit, Withdrawal, Transfer)
}


def settlement_job(
    ctx: TreasuryContext,
    record: Deposit | Withdrawal | Transfer,
    settlement: Settlement,
) -> Job | None:
    """The job that settles a new movement when the rail's delay is up; ``None`` when the rail
    never settles it on its own (a bank-file rail: the bank's statement settles it)."""
    delay = ctx.rail.settlement_delay(settlement)
    if delay is None:
        return None
    return Job(
        id=ctx.ids.new_id("job"),
        kind=KINDS[record.prefix].job,
        resource_id=record.id,
        company_id=record.company_id,
        due_at=record.created_at + delay,
    )


def locked_pending(
    uow: UnitOfWork, kind: type[M], record_id: str, company_id: int | None, param: str = "id"
) -> M:
    """The record, locked for this transaction, refused unless it is still pending."""
    noun = KINDS[kind.prefix].noun
    record = uow.records.get(kind, record_id, company_id, for_update=True)
    if record is None:
        raise NotFound(f"No such {noun}: {record_id}", param=param)
    if not settleable(record.status):
        raise InvalidRequestError(
            f"The {noun} {record_id} is already {record.status.value}", code="movement_not_pending"
        )
    return record


def complete_in(
    uow: UnitOfWork, ctx: TreasuryContext, record: M, *, received: int | None = None
) -> M:
    """Complete a locked pending movement: post its legs (a deposit may arrive for another sum)."""
    update: dict[str, object] = {"status": next_status(record.status, MovementTrigger.COMPLETE)}
    legs: tuple[Leg, ...]
    if isinstance(record, Deposit) and received is not None and received != record.from_amount:
        # The bank delivered a different sum: release the reservation, credit what arrived,
        # converted at the rate the deposit was quoted.
        to_amount = convert(
            received,
            ctx.currencies.get(record.from_currency_id),
            ctx.currencies.get(record.to_currency_id),
            record.exchange_rate_from_to,
        )
        if to_amount <= 0:
            raise ValidationFailed(
                f"{received} {record.from_currency_id} converts to nothing in "
                f"{record.to_currency_id}",
                param="amount",
                code="amount_too_small",
            )
        legs = tuple(VoidPending(p) for p in record.pending_ids)
        legs += completed_deposit_legs(
            record.wallet_id,
            record.from_currency_id,
            received,
            record.to_currency_id,
            to_amount,
        )
        update |= {"from_amount": received, "to_amount": to_amount}
    else:
        legs = tuple(PostPending(p) for p in record.pending_ids)
    _apply(uow, ctx, record, legs, "complete")
    # model_copy keeps the concrete class; mypy only sees the TypeVar's bound.
    done = cast(M, record.model_copy(update=update))
    return _finish(uow, ctx, record, done, KINDS[record.prefix].completed)


def fail_in(uow: UnitOfWork, ctx: TreasuryContext, record: M, *, code: str, message: str) -> M:
    """Fail a locked pending movement: void every reservation, record why."""
    _apply(uow, ctx, record, tuple(VoidPending(p) for p in record.pending_ids), "fail")
    failed = cast(
        M,
        record.model_copy(
            update={
                "status": next_status(record.status, MovementTrigger.FAIL),
                "error": MovementError(code=code, message=message),
            }
        ),
    )
    return _finish(uow, ctx, record, failed, KINDS[record.prefix].failed)


def _apply(
    uow: UnitOfWork, ctx: TreasuryContext, record: M, legs: tuple[Leg, ...], verb: str
) -> None:
    if legs:
        journal = Journal(
            ctx.ids.new_id("jr"),
            legs,
            operation=f"{KINDS[record.prefix].noun}_{verb}",
            company_id=record.company_id,
            source_id=record.id,
        )
        uow.ledger.apply(journal, ctx.clock.now())


def _finish(uow: UnitOfWork, ctx: TreasuryContext, before: M, after: M, event: EventType) -> M:
    uow.records.update(after)
    uow.jobs.finish_for(before.id)
    ctx.event(uow, event, after)
    return after


def settle(
    ctx: TreasuryContext,
    kind: type[M],
    record_id: str,
    *,
    param: str,
    company_id: int | None = None,
    fail: tuple[str, str] | None = None,
    received: int | None = None,
    idempotency: IdempotencyTicket[M] | None = None,
) -> Callable[[UnitOfWork], M]:
    """The transaction that completes (or, with ``fail=(code, message)``, fails) a movement.

    The idempotency ticket, if any, completes in the same transaction, so a retried settle call
    replays its first answer instead of being refused as no longer pending.
    """
    require_id(record_id, kind.prefix, KINDS[kind.prefix].noun, param)

    def run(uow: UnitOfWork) -> M:
        record = locked_pending(uow, kind, record_id, company_id, param)
        if isinstance(record, Withdrawal) and record.bank_export_id is not None:
            # The payment file is at the bank: whether it paid is the bank's to say, on its
            # statement. Failing it by hand would refund a payout the bank may still make.
            raise InvalidRequestError(
                f"The withdrawal {record.id} was sent to the bank in payment file "
                f"{record.bank_export_id}; only the bank's statement settles it",
                code="movement_exported",
            )
        if fail is not None:
            done = fail_in(uow, ctx, record, code=fail[0], message=fail[1])
        else:
            done = complete_in(uow, ctx, record, received=received)
        return finish(uow, idempotency, done)

    return run


#: A job's work: lock what the job is about, claim the job (``uow.jobs.claim``; ``False`` when
#: another runner holds it or it is done), do the work and finish the job, all in ``uow``.
JobHandler = Callable[[UnitOfWork, Job], bool]

#: A job whose work calls out (a card provider): awaited outside any transaction, it does the
#: call and then claims and finishes the job in a transaction of its own; ``False`` when it was
#: not the one to finish it. Two runners may both do the call before one claims the job, so
#: the work must be safe to repeat (at least once, not exactly once).
OutsideJobHandler = Callable[[Job], Awaitable[bool]]


class SettlementService:
    """Runs the jobs that fall due on the clock: settlements, and whatever else is registered."""

    def __init__(self, ctx: TreasuryContext) -> None:
        self._ctx = ctx
        self._handlers: dict[str, JobHandler] = dict.fromkeys(JOB_KINDS, self._settle)
        self._outside: dict[str, OutsideJobHandler] = {}

    def register(self, kind: str, handler: JobHandler) -> None:
        """Run ``handler`` for due jobs of ``kind`` (the payments service registers its own)."""
        self._handlers[kind] = handler

    def register_outside(self, kind: str, handler: OutsideJobHandler) -> None:
        """Await ``handler`` for due jobs of ``kind``, outside any transaction (its work calls
        out and must not hold a transaction open meanwhile)."""
        self._outside[kind] = handler

    def _settle(self, uow: UnitOfWork, job: Job) -> bool:
        # Lock the record before the job: every path that settles by hand locks the record and
        # then retires its jobs, and one lock order means no deadlock.
        record = uow.records.get(JOB_KINDS[job.kind], job.resource_id, None, for_update=True)
        claimed = uow.jobs.claim(job.id)
        if claimed is None:  # done meanwhile, or another runner holds it
            return False
        if record is not None and settleable(record.status):
            complete_in(uow, self._ctx, record)  # the sandbox rail confirms what falls due
        uow.jobs.finish(claimed.id)
        return True

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
        ctx = self._ctx
        now = ctx.clock.now()
        due = await ctx.storage.run(lambda uow: uow.jobs.due(now, limit), write=False)
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
                ran += await ctx.storage.run(run)
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
