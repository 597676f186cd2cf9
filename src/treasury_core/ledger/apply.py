"""Applying a journal: the one routine every storage runs, over the primitive steps it supplies.

Rules (the order of the steps is the rule; :mod:`treasury_core.ledger.kernel` has the arithmetic):
1. The pending movements the journal resolves are read and locked, in sorted id order, and the
   journal is planned against them (:func:`plan_journal`), so a refused plan writes nothing.
2. Each touched account gets its delta, in :attr:`LedgerPlan.account_ids` order (sorted): the
   storage locks each account as it adds to it, and two journals over the same accounts queue
   behind each other instead of deadlocking.
3. Every touched account is then checked as updated (:func:`check_account`), so the check sees
   every movement committed before this one. An account whose counters the storage did not read
   back (an unguarded account it keeps in parts, the SQL adapter's stripes) is checked for its
   currency and its guard only: it is never checked for funds.
4. The postings are written; a posting id already stored means the journal was applied before
   (:func:`duplicate_journal`). Then the pending movements, then each touched wallet's history
   (:func:`wallet_entries`), from the history positions the posting step read under the locks.

A refusal raises out of a step; the caller's transaction rolls back whatever the steps before
it wrote, so a refused journal changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from treasury_core.errors import LedgerInvariantViolation
from treasury_core.ledger.accounts import Account, AccountKind
from treasury_core.ledger.history import EntryPosition, WalletEntry, wallet_entries
from treasury_core.ledger.journal import Journal
from treasury_core.ledger.kernel import (
    LedgerPlan,
    check_account,
    duplicate_journal,
    plan_journal,
    referenced_pendings,
)
from treasury_core.ledger.postings import PendingMovement


class PostingExists(Exception):
    """Raised by :meth:`LedgerSteps.write_postings` when a posting id is already stored."""


class LedgerSteps(Protocol):
    """The primitive steps a storage supplies to :func:`apply_journal`, inside one transaction.

    Each step only reads or writes what it is given; none decides a ledger rule. A storage may
    batch a step's statements as it likes (the SQL adapter sends one statement per account and
    per posting, and reads the wallets' history positions with the first posting).
    """

    def lock_pendings(self, pending_ids: Sequence[str]) -> Mapping[str, PendingMovement]:
        """The stored pending movements among ``pending_ids`` (sorted), locked until the
        transaction ends; an id not stored is left out."""
        ...

    def add_deltas(self, plan: LedgerPlan) -> tuple[Mapping[str, Account], Collection[str]]:
        """Add ``plan.deltas`` to the accounts' counters, locking each account as it is
        changed, in ``plan.account_ids`` order.

        Returns the accounts as updated (an id not stored is left out) and the ids among them
        whose counters were not read back: those accounts carry their identity (id, currency,
        kind, company, guard) and no meaningful counters. Only an unguarded account may be one.
        """
        ...

    def write_postings(
        self, plan: LedgerPlan, wallet_ids: Sequence[str]
    ) -> Mapping[str, EntryPosition | None]:
        """Write ``plan.postings`` (with ``plan.journal.operation``), and return the position of
        the latest history entry of each of ``wallet_ids`` (``None``: no history yet), read
        after the accounts were locked. Raises :class:`PostingExists` if a posting id is taken.
        """
        ...

    def write_pendings(self, plan: LedgerPlan) -> None:
        """Store ``plan.new_pendings`` and write the new state of ``plan.resolved_pendings``
        (each still ``pending`` as stored: it was locked by :meth:`lock_pendings`)."""
        ...

    def write_entries(self, entries: Sequence[WalletEntry]) -> None:
        """Append ``entries`` to their wallets' histories, in the order given."""
        ...


def apply_journal(steps: LedgerSteps, journal: Journal, now: datetime) -> LedgerPlan:
    """Plan, lock, check and write ``journal`` through ``steps`` (see the module's rules)."""
    pending_ids = referenced_pendings(journal)
    pendings = steps.lock_pendings(pending_ids) if pending_ids else {}
    plan = plan_journal(journal, pendings, now)
    after, unread = steps.add_deltas(plan)
    wallets: list[str] = []
    for account_id in plan.account_ids:
        account = after.get(account_id)
        if account is None:
            raise LedgerInvariantViolation(f"unknown ledger account {account_id}")
        if account_id in unread:
            _check_identity(account, plan)
        else:
            check_account(account, plan)
        if account.kind is AccountKind.WALLET:
            wallets.append(account_id)
    try:
        last = steps.write_postings(plan, wallets)
    except PostingExists as exc:
        raise duplicate_journal(journal) from exc
    if plan.new_pendings or plan.resolved_pendings:
        steps.write_pendings(plan)
    entries = wallet_entries(plan, after, last)
    if entries:
        steps.write_entries(entries)
    return plan


def _check_identity(account: Account, plan: LedgerPlan) -> None:
    """What :func:`check_account` checks of an account whose counters were not read back."""
    if account.guarded:
        raise LedgerInvariantViolation(
            f"account {account.id} is guarded: its counters must be read back to check funds"
        )
    expected = plan.currencies[account.id]
    if account.currency != expected:
        raise LedgerInvariantViolation(
            f"account {account.id} holds {account.currency}, journal {plan.journal.id} moves "
            f"{expected}"
        )
