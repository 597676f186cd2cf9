"""The ledger invariants as executable checks, for any storage backend.

:func:`check_invariants` reads the whole ledger through the storage port in one read-only
transaction and checks the invariants of ``ledger-invariants.md`` that a single snapshot can show:

1. every journal balances per currency;
2. per currency, posted credits minus debits sum to zero over all accounts, and pending debits
   equal pending credits;
3. every stored counter equals the fold of the account's postings;
4. the derived balance figures follow from the counters (``pending_in`` never counts as available);
5. no counter is negative, and no guarded account (every wallet is one) is below
   ``-overdraft_limit`` of available funds;
6. each pending movement has exactly one resolution posting when it is resolved and none while it
   is pending, the resolution matches its status, and what is posted never exceeds what was
   reserved (and, from 7, a movement was posted before its deadline and expired at or after it).

:func:`check_history` adds what only two snapshots of the same ledger can show: postings are
append-only, posted counters never decrease, and a resolved pending movement stays resolved.

Every failed check is collected and raised together as one :class:`InvariantViolation`, so a
broken ledger shows all its symptoms at once. The checks live in the ledger package because
production code runs them too (:func:`~treasury_core.ledger.audit.audit_ledger`, behind
``treasury ledger verify``, shares the row-level checks); the testing kit re-exports them, and
its Hypothesis machines run them after every step.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from treasury_core.ledger import (
    Account,
    AccountKind,
    BalanceRecord,
    CounterDelta,
    PendingCategory,
    PendingMovement,
    PendingStatus,
    Posting,
    PostingKind,
    WalletEntry,
    fold_postings,
)
from treasury_core.ledger.reading import LedgerSource, LedgerView

__all__ = [
    "InvariantViolation",
    "LedgerSnapshot",
    "check_history",
    "check_invariants",
    "check_snapshot",
    "history_violations",
    "ledger_violations",
    "read_ledger",
    "wallet_history_violations",
]

_Row = TypeVar("_Row", Account, Posting, PendingMovement)

_COUNTER_NAMES = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)

# The resolution posting kind each terminal status must have been reached by.
_RESOLUTION_KIND = {
    PendingStatus.POSTED: PostingKind.POST_PENDING,
    PendingStatus.VOIDED: PostingKind.VOID_PENDING,
    PendingStatus.EXPIRED: PostingKind.EXPIRE_PENDING,
}
_RESOLUTION_KINDS = frozenset(_RESOLUTION_KIND.values())


class InvariantViolation(AssertionError):
    """The ledger broke one or more invariants; ``violations`` lists each one found."""

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations: tuple[str, ...] = tuple(violations)
        listing = "\n".join(f"  - {v}" for v in self.violations)
        super().__init__(f"{len(self.violations)} ledger invariant violation(s):\n{listing}")


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """Everything the ledger holds, read in one transaction and sorted by id (so comparable)."""

    accounts: tuple[Account, ...]
    postings: tuple[Posting, ...]
    pendings: tuple[PendingMovement, ...]

    @classmethod
    def of(
        cls,
        accounts: Iterable[Account],
        postings: Iterable[Posting],
        pendings: Iterable[PendingMovement],
    ) -> LedgerSnapshot:
        """A snapshot of these rows, each kind sorted by id."""
        return cls(
            accounts=tuple(sorted(accounts, key=lambda a: a.id)),
            postings=tuple(sorted(postings, key=lambda p: p.id)),
            pendings=tuple(sorted(pendings, key=lambda p: p.id)),
        )

    def account(self, account_id: str) -> Account | None:
        """The account with this id, or ``None``."""
        return next((a for a in self.accounts if a.id == account_id), None)

    def pending(self, pending_id: str) -> PendingMovement | None:
        """The pending movement with this id, or ``None``."""
        return next((p for p in self.pendings if p.id == pending_id), None)


def read_ledger(storage: LedgerSource[LedgerView]) -> LedgerSnapshot:
    """Read every account, posting and pending movement in one read-only snapshot.

    The transaction asks for ``snapshot=True``, so the three reads agree with each other even
    while other transactions write (REPEATABLE READ on PostgreSQL, a WAL snapshot on SQLite).
    """

    def read(uow: LedgerView) -> LedgerSnapshot:
        ledger = uow.ledger
        # Materialize inside the transaction: SQL repositories return lazy cursors.
        return LedgerSnapshot.of(
            list(ledger.all_accounts()), list(ledger.postings()), list(ledger.pendings())
        )

    return storage.run_sync(read, write=False, snapshot=True)


def check_invariants(storage: LedgerSource[LedgerView]) -> None:
    """Check the ledger in ``storage``; raise :class:`InvariantViolation` listing every breach.

    Works through the storage port only (read-only transactions), so it runs on any backend.
    Besides the snapshot's invariants, each wallet's history must end on the wallet's own
    figures (its entries are derived from the postings; rule 3 read for them). Call it when no
    other transaction is writing (see :func:`read_ledger`).
    """
    violations = ledger_violations(read_ledger(storage))
    violations.extend(wallet_history_violations(storage))
    if violations:
        raise InvariantViolation(violations)


def wallet_history_violations(storage: LedgerSource[LedgerView]) -> list[str]:
    """Wallets whose latest history entry disagrees with their counters, or that moved money
    without any history entry, read in one snapshot."""

    def read(uow: LedgerView) -> list[tuple[Account, WalletEntry | None]]:
        wallets = [a for a in uow.ledger.all_accounts() if a.kind is AccountKind.WALLET]
        return [(a, uow.ledger.last_wallet_entry(a.id, None)) for a in wallets]

    violations: list[str] = []
    for account, entry in storage.run_sync(read, write=False, snapshot=True):
        if entry is None:
            if any(account.counters()):
                violations.append(f"[history] wallet {account.id} moved money but has no history")
            continue
        # From the counters themselves: a wrong derived figure is rule 4's to report.
        debits, credits, holds, out, pending_in = account.counters()
        figures = (credits - debits, credits - debits - holds - out, pending_in)
        ends = (entry.balance_after, entry.available_balance_after, entry.pending_in_after)
        if ends != figures:
            violations.append(
                f"[history] wallet {account.id}: its history ends at (balance, available,"
                f" pending_in) {ends}, its counters give {figures}"
            )
    return violations


def check_snapshot(snapshot: LedgerSnapshot) -> None:
    """Raise :class:`InvariantViolation` if ``snapshot`` breaks any single-snapshot invariant."""
    violations = ledger_violations(snapshot)
    if violations:
        raise InvariantViolation(violations)


def check_history(before: LedgerSnapshot, after: LedgerSnapshot) -> None:
    """Raise :class:`InvariantViolation` if ``after`` cannot have followed ``before``."""
    violations = history_violations(before, after)
    if violations:
        raise InvariantViolation(violations)


def ledger_violations(snapshot: LedgerSnapshot) -> list[str]:
    """Every single-snapshot invariant ``snapshot`` breaks, as readable messages (empty if none)."""
    violations: list[str] = []
    accounts = _unique_by_id("account", snapshot.accounts, violations)
    postings = _unique_by_id("posting", snapshot.postings, violations)
    pendings = _unique_by_id("pending movement", snapshot.pendings, violations)

    for posting in postings.values():
        violations.extend(_posting_shape(posting, accounts))
    violations.extend(_journals_balance(postings.values(), accounts))
    violations.extend(_currencies_sum_to_zero(accounts.values()))
    violations.extend(_counters_match_postings(accounts.values(), postings.values()))
    for account in accounts.values():
        violations.extend(_account_bounds(account))
    violations.extend(_pendings_consistent(pendings, postings))
    violations.extend(_open_reservations_match_counters(accounts.values(), pendings.values()))
    return violations


def history_violations(before: LedgerSnapshot, after: LedgerSnapshot) -> list[str]:
    """What in ``after`` contradicts ``before`` under append-only, monotonic rules (3 and 6)."""
    violations: list[str] = []
    after_postings = {p.id: p for p in after.postings}
    for posting in before.postings:
        now = after_postings.get(posting.id)
        if now is None:
            violations.append(f"[3] posting {posting.id} was deleted")
        elif now != posting:
            violations.append(f"[3] posting {posting.id} was modified: {posting} -> {now}")
    after_accounts = {a.id: a for a in after.accounts}
    for account in before.accounts:
        later = after_accounts.get(account.id)
        if later is None:
            violations.append(f"[3] account {account.id} was deleted")
            continue
        for name in ("debits_posted", "credits_posted"):
            old, new = getattr(account, name), getattr(later, name)
            if new < old:
                violations.append(f"[3] account {account.id}: {name} decreased from {old} to {new}")
    after_pendings = {p.id: p for p in after.pendings}
    for pending in before.pendings:
        later_pending = after_pendings.get(pending.id)
        if later_pending is None:
            violations.append(f"[6] pending movement {pending.id} was deleted")
        elif pending.status is PendingStatus.PENDING:
            # While pending, only the resolution (status and resolving posting) may change.
            unresolved = replace(later_pending, status=PendingStatus.PENDING, resolved_by=None)
            if unresolved != pending:
                violations.append(
                    f"[6] pending movement {pending.id} was modified: {pending} -> {later_pending}"
                )
        elif later_pending != pending:
            violations.append(
                f"[6] pending movement {pending.id} changed after reaching {pending.status.value}: "
                f"{pending} -> {later_pending}"
            )
    return violations


def _unique_by_id(what: str, rows: Iterable[_Row], violations: list[str]) -> dict[str, _Row]:
    by_id: dict[str, _Row] = {}
    for row in rows:
        if row.id in by_id:
            violations.append(f"[3] {what} id {row.id} is stored twice")
        by_id[row.id] = row
    return by_id


def _counters(delta: CounterDelta | Account) -> tuple[int, ...]:
    return tuple(getattr(delta, name) for name in _COUNTER_NAMES)


def _posting_shape(posting: Posting, accounts: dict[str, Account]) -> list[str]:
    """A posting names two distinct known accounts of its currency and has its kind's shape."""
    out: list[str] = []
    label = f"posting {posting.id} ({posting.kind.value})"
    if posting.debit_account_id == posting.credit_account_id:
        out.append(f"[1] {label} debits and credits the same account {posting.debit_account_id}")
    for side, account_id in (
        ("debit", posting.debit_account_id),
        ("credit", posting.credit_account_id),
    ):
        account = accounts.get(account_id)
        if account is None:
            out.append(f"[3] {label}: {side} account {account_id} does not exist")
        elif account.currency != posting.currency:
            out.append(
                f"[1] {label} is in {posting.currency} but its {side} account {account_id} "
                f"holds {account.currency}"
            )
    kind = posting.kind
    if kind in (PostingKind.POSTED, PostingKind.PENDING):
        if posting.amount <= 0:
            out.append(f"[1] {label} has non-positive amount {posting.amount}")
        if posting.released != 0 or posting.pending_id is not None:
            out.append(
                f"[6] {label} releases {posting.released} / names pending {posting.pending_id}"
            )
        if (kind is PostingKind.PENDING) != (posting.category is not None):
            out.append(f"[6] {label} has category {posting.category}")
    else:
        if posting.pending_id is None or posting.category is None:
            out.append(f"[6] {label} names no pending movement or category")
        if posting.released <= 0:
            out.append(f"[6] {label} releases {posting.released}, not a reserved amount")
        if kind is PostingKind.POST_PENDING:
            if not 0 < posting.amount <= posting.released:
                out.append(
                    f"[6] {label} posts {posting.amount} of {posting.released} reserved "
                    "(must be positive and at most the reservation)"
                )
        elif posting.amount != 0:
            out.append(f"[6] {label} moves {posting.amount}; a void or expiry moves nothing")
    return out


def _journals_balance(postings: Iterable[Posting], accounts: dict[str, Account]) -> list[str]:
    """Invariant 1, measured on the accounts' own currencies so a mislabelled posting shows."""
    posted: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    pending: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for posting in postings:
        for account_id in {posting.debit_account_id, posting.credit_account_id}:
            account = accounts.get(account_id)
            if account is None:
                continue  # reported by _posting_shape
            delta = posting.delta_for(account_id)
            key = (posting.journal_id, account.currency)
            posted[key][0] += delta.debits_posted
            posted[key][1] += delta.credits_posted
            pending[key][0] += delta.debits_pending_holds + delta.debits_pending_out
            pending[key][1] += delta.credits_pending
    out: list[str] = []
    for (journal_id, currency), (debits, credits) in sorted(posted.items()):
        if debits != credits:
            out.append(
                f"[1] journal {journal_id} does not balance in {currency}: "
                f"posted debits {debits} != posted credits {credits}"
            )
    for (journal_id, currency), (debits, credits) in sorted(pending.items()):
        if debits != credits:
            out.append(
                f"[1] journal {journal_id} does not balance in {currency}: "
                f"pending debits {debits} != pending credits {credits}"
            )
    return out


def _currencies_sum_to_zero(accounts: Iterable[Account]) -> list[str]:
    """Invariant 2 on the stored counters."""
    balance: Counter[str] = Counter()
    pending_debits: Counter[str] = Counter()
    pending_credits: Counter[str] = Counter()
    for account in accounts:
        balance[account.currency] += account.balance
        pending_debits[account.currency] += (
            account.debits_pending_holds + account.debits_pending_out
        )
        pending_credits[account.currency] += account.credits_pending
    out: list[str] = []
    for currency in sorted(set(balance) | set(pending_debits) | set(pending_credits)):
        if balance[currency] != 0:
            out.append(
                f"[2] {currency}: posted credits - debits over all accounts is "
                f"{balance[currency]}, not 0"
            )
        if pending_debits[currency] != pending_credits[currency]:
            out.append(
                f"[2] {currency}: pending debits {pending_debits[currency]} != "
                f"pending credits {pending_credits[currency]} over all accounts"
            )
    return out


def _counters_match_postings(accounts: Iterable[Account], postings: Iterable[Posting]) -> list[str]:
    """Invariant 3: each account's counters are the fold of its postings."""
    by_account: dict[str, list[Posting]] = defaultdict(list)
    for posting in postings:
        for account_id in {posting.debit_account_id, posting.credit_account_id}:
            by_account[account_id].append(posting)
    out: list[str] = []
    for account in accounts:
        folded = fold_postings(account.id, by_account.get(account.id, ()))
        stored, expected = _counters(account), _counters(folded)
        for name, have, want in zip(_COUNTER_NAMES, stored, expected, strict=True):
            if have != want:
                out.append(
                    f"[3] account {account.id}: stored {name} is {have}, "
                    f"its postings fold to {want}"
                )
    return out


def _account_bounds(account: Account) -> list[str]:
    """Invariants 4 and 5 for one account."""
    out: list[str] = []
    label = f"account {account.id}"
    record = BalanceRecord.of(account)
    derived = {
        "balance": account.credits_posted - account.debits_posted,
        "pending_holds": account.debits_pending_holds,
        "pending_out": account.debits_pending_out,
        "pending_in": account.credits_pending,
    }
    derived["available_balance"] = (
        derived["balance"] - derived["pending_holds"] - derived["pending_out"]
    )
    for name, want in derived.items():
        have = getattr(record, name)
        if have != want:
            out.append(f"[4] {label}: {name} is {have}, the counters give {want}")
    for name, value in zip(_COUNTER_NAMES, _counters(account), strict=True):
        if value < 0:
            out.append(f"[5] {label}: counter {name} is negative ({value})")
    if account.overdraft_limit < 0:
        out.append(f"[5] {label}: overdraft limit {account.overdraft_limit} is negative")
    # Wallets are guarded when opened; should one not be, it still owes the bound (invariant 5).
    if (account.guarded or account.kind is AccountKind.WALLET) and (
        account.available_balance < -account.overdraft_limit
    ):
        out.append(
            f"[5] {label}: available balance {account.available_balance} is below "
            f"{-account.overdraft_limit} (overdraft limit {account.overdraft_limit})"
        )
    return out


def _pendings_consistent(
    pendings: dict[str, PendingMovement], postings: dict[str, Posting]
) -> list[str]:
    """Invariant 6 (and the static part of 7): reservation and resolution postings match."""
    out: list[str] = []
    resolutions: dict[str, list[Posting]] = defaultdict(list)
    for posting in postings.values():
        if posting.kind in _RESOLUTION_KINDS:
            if posting.pending_id is None:
                continue  # reported by _posting_shape
            if posting.pending_id not in pendings:
                out.append(
                    f"[6] posting {posting.id} resolves unknown pending {posting.pending_id}"
                )
            resolutions[posting.pending_id].append(posting)
        elif posting.kind is PostingKind.PENDING and posting.id not in pendings:
            out.append(f"[6] reservation posting {posting.id} has no pending movement")
    for pending in pendings.values():
        out.extend(_reservation_matches(pending, postings.get(pending.id)))
        out.extend(_resolution_matches(pending, resolutions.get(pending.id, [])))
    return out


def _reservation_matches(pending: PendingMovement, reservation: Posting | None) -> list[str]:
    label = f"pending movement {pending.id} ({pending.status.value})"
    out: list[str] = []
    if pending.amount <= 0:
        out.append(f"[6] {label} reserves non-positive amount {pending.amount}")
    if reservation is None or reservation.kind is not PostingKind.PENDING:
        out.append(f"[6] {label} has no reservation posting {pending.id}")
    elif (
        reservation.debit_account_id,
        reservation.credit_account_id,
        reservation.currency,
        reservation.amount,
        reservation.category,
        reservation.deadline,
    ) != (
        pending.debit_account_id,
        pending.credit_account_id,
        pending.currency,
        pending.amount,
        pending.category,
        pending.deadline,
    ):
        out.append(f"[6] {label} differs from its reservation posting: {reservation}")
    return out


def _resolution_matches(pending: PendingMovement, resolved_by: list[Posting]) -> list[str]:
    label = f"pending movement {pending.id} ({pending.status.value})"
    if pending.status is PendingStatus.PENDING:
        out: list[str] = []
        if resolved_by:
            ids = ", ".join(p.id for p in resolved_by)
            out.append(f"[6] {label} is still pending but is resolved by {ids}")
        if pending.resolved_by is not None:
            out.append(f"[6] {label} is still pending but names resolution {pending.resolved_by}")
        return out
    if len(resolved_by) != 1:
        ids = ", ".join(p.id for p in resolved_by) or "none"
        return [f"[6] {label} must have exactly one resolution posting, has: {ids}"]
    resolution = resolved_by[0]
    rid = resolution.id
    out = []
    if resolution.kind is not _RESOLUTION_KIND[pending.status]:
        out.append(f"[6] {label} is resolved by a {resolution.kind.value} posting {rid}")
    if pending.resolved_by != rid:
        out.append(f"[6] {label} names resolution {pending.resolved_by}, the posting is {rid}")
    if resolution.released != pending.amount:
        out.append(
            f"[6] {label}: resolution {rid} releases {resolution.released}, "
            f"{pending.amount} was reserved"
        )
    if resolution.amount > pending.amount:
        out.append(f"[6] {label}: {resolution.amount} posted exceeds the {pending.amount} reserved")
    if (
        resolution.debit_account_id,
        resolution.credit_account_id,
        resolution.currency,
        resolution.category,
    ) != (pending.debit_account_id, pending.credit_account_id, pending.currency, pending.category):
        out.append(f"[6] {label}: resolution {rid} moves between other accounts")
    # Invariant 7: capture only before the deadline, expiry only at or after it.
    at, deadline = resolution.created_at, pending.deadline
    if resolution.kind is PostingKind.POST_PENDING and deadline is not None and at >= deadline:
        out.append(f"[7] {label} was posted at {at}, at or after its deadline {deadline}")
    if resolution.kind is PostingKind.EXPIRE_PENDING and (deadline is None or at < deadline):
        out.append(f"[7] {label} expired at {at}, before its deadline {deadline}")
    return out


def _open_reservations_match_counters(
    accounts: Iterable[Account], pendings: Iterable[PendingMovement]
) -> list[str]:
    """Pending counters are exactly the still-open reservations (ties 3 and 6 together)."""
    holds: Counter[str] = Counter()
    out_: Counter[str] = Counter()
    incoming: Counter[str] = Counter()
    for pending in pendings:
        if pending.status is not PendingStatus.PENDING:
            continue
        if pending.category is PendingCategory.HOLD:
            holds[pending.debit_account_id] += pending.amount
        else:
            out_[pending.debit_account_id] += pending.amount
        incoming[pending.credit_account_id] += pending.amount
    out: list[str] = []
    for account in accounts:
        for name, have, want in (
            ("debits_pending_holds", account.debits_pending_holds, holds[account.id]),
            ("debits_pending_out", account.debits_pending_out, out_[account.id]),
            ("credits_pending", account.credits_pending, incoming[account.id]),
        ):
            if have != want:
                out.append(
                    f"[6] account {account.id}: {name} is {have}, its open pending movements "
                    f"reserve {want}"
                )
    return out
