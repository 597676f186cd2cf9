"""Planning and applying journals. Pure: no I/O, time comes in as ``now``.

Rules:
1. A journal has at least one leg; amounts are positive ``int`` minor units; a leg never debits
   and credits the same account.
2. A :class:`PostPending`, :class:`VoidPending` or :class:`ExpirePending` names a movement that is
   still ``pending``, at most once per journal. Posting needs ``now`` before the deadline and at
   most the reserved amount; expiring needs ``now`` at or past it.
3. Deltas are summed per account and checked on the account *after* the whole journal: a guarded
   account whose debit exposure grows must keep ``available_balance >= -overdraft_limit``.
4. Any failure of planning raises before anything is written; a failed check raises before the
   journal's transaction commits, so a refused journal changes nothing.

:func:`treasury_core.ledger.apply.apply_journal` runs these rules over a storage's primitive
steps: it plans, has the accounts of ``plan.account_ids`` updated (and locked, in sorted id
order), and accepts the journal only if :func:`check_account` passes for each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from treasury_core.errors import InsufficientFunds, LedgerInvariantViolation, LedgerRejected
from treasury_core.ledger.accounts import Account, CounterDelta
from treasury_core.ledger.journal import (
    ExpirePending,
    Journal,
    Move,
    PostPending,
    Reserve,
    VoidPending,
)
from treasury_core.ledger.postings import PendingMovement, PendingStatus, Posting, PostingKind


@dataclass(frozen=True, slots=True)
class LedgerPlan:
    """Everything a journal will write: postings, per-account deltas and pending-state changes."""

    journal: Journal
    postings: tuple[Posting, ...]
    deltas: Mapping[str, CounterDelta]
    currencies: Mapping[str, str]
    new_pendings: tuple[PendingMovement, ...]
    resolved_pendings: tuple[PendingMovement, ...]

    @property
    def account_ids(self) -> list[str]:
        """The accounts this journal touches, in the order they must be locked."""
        return sorted(self.deltas)


def plan_journal(
    journal: Journal, pendings: Mapping[str, PendingMovement], now: datetime
) -> LedgerPlan:
    """Validate ``journal`` against the pending movements it resolves and plan its writes.

    ``pendings`` must hold every movement named by a phase-two leg, as currently stored.
    Raises :class:`LedgerRejected` for a rule a request can break, and
    :class:`LedgerInvariantViolation` for one only a programming error can.
    """
    if not journal.legs:
        raise LedgerInvariantViolation("a journal needs at least one leg")
    postings: list[Posting] = []
    new_pendings: list[PendingMovement] = []
    resolved: dict[str, PendingMovement] = {}
    for index, leg in enumerate(journal.legs):
        posting_id = journal.leg_id(index)
        if isinstance(leg, Move | Reserve):
            _check_new_leg(leg.debit, leg.credit, leg.amount)
            kind = PostingKind.PENDING if isinstance(leg, Reserve) else PostingKind.POSTED
            posting = Posting(
                id=posting_id,
                journal_id=journal.id,
                kind=kind,
                debit_account_id=leg.debit,
                credit_account_id=leg.credit,
                currency=leg.currency,
                amount=leg.amount,
                created_at=now,
                category=leg.category if isinstance(leg, Reserve) else None,
                deadline=leg.deadline if isinstance(leg, Reserve) else None,
            )
            if isinstance(leg, Reserve):
                new_pendings.append(
                    PendingMovement(
                        id=posting_id,
                        debit_account_id=leg.debit,
                        credit_account_id=leg.credit,
                        currency=leg.currency,
                        amount=leg.amount,
                        category=leg.category,
                        deadline=leg.deadline,
                    )
                )
        else:
            pending = _open_pending(leg.pending_id, pendings, resolved)
            posting, status = _resolve(leg, pending, posting_id, journal.id, now)
            resolved[pending.id] = replace(pending, status=status, resolved_by=posting_id)
        postings.append(posting)

    deltas: dict[str, CounterDelta] = {}
    currencies: dict[str, str] = {}
    for posting in postings:
        for account_id in (posting.debit_account_id, posting.credit_account_id):
            side = posting.delta_for(account_id)
            deltas[account_id] = deltas[account_id] + side if account_id in deltas else side
            known = currencies.setdefault(account_id, posting.currency)
            if known != posting.currency:
                raise LedgerInvariantViolation(
                    f"account {account_id} is used in both {known} and {posting.currency}"
                )
    return LedgerPlan(
        journal=journal,
        postings=tuple(postings),
        deltas=dict(sorted(deltas.items())),
        currencies=currencies,
        new_pendings=tuple(new_pendings),
        resolved_pendings=tuple(resolved.values()),
    )


def referenced_pendings(journal: Journal) -> list[str]:
    """The pending movements ``journal`` resolves, sorted (the order to lock them in)."""
    return sorted(
        {
            leg.pending_id
            for leg in journal.legs
            if isinstance(leg, PostPending | VoidPending | ExpirePending)
        }
    )


def check_account(after: Account, plan: LedgerPlan) -> None:
    """Refuse the plan if ``after`` (the account with the plan applied) breaks a ledger rule."""
    expected = plan.currencies.get(after.id)
    if expected is None:
        raise LedgerInvariantViolation(
            f"account {after.id} is not part of journal {plan.journal.id}"
        )
    if after.currency != expected:
        raise LedgerInvariantViolation(
            f"account {after.id} holds {after.currency}, journal {plan.journal.id} moves {expected}"
        )
    delta = plan.deltas[after.id]
    if (
        after.guarded
        and delta.debit_exposure > 0
        and after.available_balance < -after.overdraft_limit
    ):
        raise InsufficientFunds(
            "Insufficient funds: the available balance does not cover this amount",
            param="amount",
        )
    if min(after.counters()) < 0:
        raise LedgerInvariantViolation(f"account {after.id} would have a negative counter")


def apply_plan(accounts: Mapping[str, Account], plan: LedgerPlan) -> dict[str, Account]:
    """The touched accounts after ``plan``, checked; raises and returns nothing on any refusal."""
    result: dict[str, Account] = {}
    for account_id in plan.account_ids:
        account = accounts.get(account_id)
        if account is None:
            raise LedgerInvariantViolation(f"unknown ledger account {account_id}")
        after = account.with_delta(plan.deltas[account_id])
        check_account(after, plan)
        result[account_id] = after
    return result


def duplicate_journal(journal: Journal) -> LedgerRejected:
    """The error every storage raises for a journal id that was applied before."""
    return LedgerRejected(f"Journal {journal.id} was already applied", code="journal_duplicate")


def _check_new_leg(debit: str, credit: str, amount: int) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise LedgerInvariantViolation(f"amounts are int minor units, not {type(amount).__name__}")
    if amount <= 0:
        raise LedgerInvariantViolation("a movement's amount must be positive")
    if debit == credit:
        raise LedgerInvariantViolation("a movement cannot debit and credit the same account")


def _open_pending(
    pending_id: str,
    pendings: Mapping[str, PendingMovement],
    resolved: Mapping[str, PendingMovement],
) -> PendingMovement:
    if pending_id in resolved:
        raise LedgerRejected(
            f"Pending movement {pending_id} is resolved twice in one journal",
            code="pending_already_resolved",
        )
    pending = pendings.get(pending_id)
    if pending is None:
        raise LedgerRejected(f"No pending movement {pending_id}", code="pending_not_found")
    if pending.status is not PendingStatus.PENDING:
        raise LedgerRejected(
            f"Pending movement {pending_id} is already {pending.status.value}",
            code="pending_already_resolved",
        )
    return pending


def _resolve(
    leg: PostPending | VoidPending | ExpirePending,
    pending: PendingMovement,
    posting_id: str,
    journal_id: str,
    now: datetime,
) -> tuple[Posting, PendingStatus]:
    expired = pending.deadline is not None and now >= pending.deadline
    if isinstance(leg, PostPending):
        if expired:
            raise LedgerRejected(
                f"Pending movement {pending.id} has expired", code="pending_expired"
            )
        amount = pending.amount if leg.amount is None else leg.amount
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise LedgerInvariantViolation("a posted amount must be a positive int")
        if amount > pending.amount:
            raise LedgerRejected(
                f"Cannot post {amount}: only {pending.amount} was reserved",
                code="amount_exceeds_pending",
            )
        kind, status = PostingKind.POST_PENDING, PendingStatus.POSTED
    elif isinstance(leg, VoidPending):
        amount, kind, status = 0, PostingKind.VOID_PENDING, PendingStatus.VOIDED
    else:
        if not expired:
            raise LedgerRejected(
                f"Pending movement {pending.id} has not reached its deadline",
                code="pending_not_due",
            )
        amount, kind, status = 0, PostingKind.EXPIRE_PENDING, PendingStatus.EXPIRED
    posting = Posting(
        id=posting_id,
        journal_id=journal_id,
        kind=kind,
        debit_account_id=pending.debit_account_id,
        credit_account_id=pending.credit_account_id,
        currency=pending.currency,
        amount=amount,
        created_at=now,
        released=pending.amount,
        category=pending.category,
        pending_id=pending.id,
    )
    return posting, status
