"""Settling movements: completing or failing a pending deposit, withdrawal or transfer.

One function serves every path that settles (the sandbox controls, the rail's schedule run by
the job runner): it locks the record, refuses one that is no longer pending, posts or voids the
record's pending ledger legs in one journal, updates the record, writes the event, and retires
the record's scheduled job, all in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
from treasury_core.services.adapters import Adapters
from treasury_core.services.idempotency import finish
from treasury_core.services.jobs import JobHandler
from treasury_core.services.record_reads import require_id

M = TypeVar("M", bound=Deposit | Withdrawal | Transfer)


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
    ctx: Adapters,
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


def complete_in(uow: UnitOfWork, ctx: Adapters, record: M, *, received: int | None = None) -> M:
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


def fail_in(uow: UnitOfWork, ctx: Adapters, record: M, *, code: str, message: str) -> M:
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


def _apply(uow: UnitOfWork, ctx: Adapters, record: M, legs: tuple[Leg, ...], verb: str) -> None:
    if legs:
        journal = Journal(
            ctx.ids.new_id("jr"),
            legs,
            operation=f"{KINDS[record.prefix].noun}_{verb}",
            company_id=record.company_id,
            source_id=record.id,
        )
        uow.ledger.apply(journal, ctx.clock.now())


def _finish(uow: UnitOfWork, ctx: Adapters, before: M, after: M, event: EventType) -> M:
    uow.records.update(after)
    uow.jobs.finish_for(before.id)
    ctx.events.write(uow, event, after)
    return after


def settle(
    ctx: Adapters,
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


class SettlementService:
    """Settles the movements whose rail delay is up: the handlers of the settlement jobs."""

    def __init__(self, *, adapters: Adapters) -> None:
        self._adapters = adapters

    def handlers(self) -> dict[str, JobHandler]:
        """Job kind → handler, for :meth:`~treasury_core.services.jobs.JobRunner.register`."""
        return dict.fromkeys(JOB_KINDS, self._settle)

    def _settle(self, uow: UnitOfWork, job: Job) -> bool:
        # Lock the record before the job: every path that settles by hand locks the record and
        # then retires its jobs, and one lock order means no deadlock.
        record = uow.records.get(JOB_KINDS[job.kind], job.resource_id, None, for_update=True)
        claimed = uow.jobs.claim(job.id)
        if claimed is None:  # done meanwhile, or another runner holds it
            return False
        if record is not None and settleable(record.status):
            complete_in(uow, self._adapters, record)  # the sandbox rail confirms what falls due
        uow.jobs.finish(claimed.id)
        return True
