"""Auditing a ledger in place: re-sum every account's postings and check the invariants.

:func:`audit_ledger` is :func:`~treasury_core.ledger.invariants.check_invariants` made fit for a
production database. It reads through the storage port in **one** read-only snapshot transaction
(REPEATABLE READ, READ ONLY on PostgreSQL; a WAL read snapshot on SQLite), so the stored counters,
the postings and the pending movements it compares are one consistent state even while the
service keeps writing: a movement committed after the audit started is invisible to every one of
its reads, never half seen, and cannot raise a false alarm.

Postings are read in pages in id order (keyset paging on the primary key) and folded into one
set of five counters per account as they pass. What it keeps:

- every account (id, currency and counters), to compare the folds with at the end;
- every posting of a two-phase movement (reservations and their resolutions), until they are
  matched with their pending movements at the end; plain movements are dropped after folding.
  A ledger of card payments is mostly two-phase postings, so memory grows with them (checking
  the pending movements page by page, with an index on the postings' ``pending_id``, would make
  it flat).

Checks, with the same messages as :func:`~treasury_core.ledger.invariants.ledger_violations`
(the ``[n]`` prefix numbers the invariant as docs/concepts/ledger.md does):

- [1] each posting names two distinct, existing accounts of its own currency and has its kind's
  shape. A posting moves one amount, debited on one account and credited on the other, so a
  journal balances in every currency exactly when each of its postings passes this check; the
  journal sums themselves need no second pass;
- [2] per currency, the stored posted balances sum to zero and pending debits equal pending
  credits;
- [3] every stored counter equals the fold of the account's postings;
- [4] and [5] the derived balances follow from the counters, no counter is negative and no
  guarded account is beyond its overdraft limit;
- [6] and [7] each pending movement has its reservation posting and exactly one matching
  resolution once resolved (none while pending), and the pending counters are exactly the open
  reservations;
- [8] with ``bank_mirrors`` (``treasury ledger verify`` passes
  :func:`~treasury_core.services.movements.safeguarding.check_bank_mirrors`): the accounts
  mirroring the
  treasury's bank accounts agree with the statement lines stored for them. The postings of
  ``bank`` accounts are kept for it as they pass (one per statement line).

The progress callback is told how far each stage is, so a caller can show a progress bar; the
report lists every difference found rather than stopping at the first.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from treasury_core.ledger.accounts import Account, AccountKind, CounterDelta

# The row-level checks are those of check_invariants, shared so the two can never disagree.
from treasury_core.ledger.invariants import (
    _COUNTER_NAMES,
    _RESOLUTION_KINDS,
    _account_bounds,
    _counters,
    _currencies_sum_to_zero,
    _posting_shape,
    _reservation_matches,
    _resolution_matches,
)
from treasury_core.ledger.postings import (
    PendingCategory,
    PendingMovement,
    PendingStatus,
    Posting,
    PostingKind,
)
from treasury_core.ledger.reading import LedgerSource, LedgerView

__all__ = ["AuditProgress", "AuditReport", "AuditStage", "BankMirrorCheck", "audit_ledger"]

#: The stages of an audit, in the order they run.
AuditStage = Literal["accounts", "postings", "pendings"]

#: Postings read per query: large enough that paging costs little, small enough to bound memory.
DEFAULT_PAGE_SIZE = 1_000


@dataclass(frozen=True, slots=True)
class AuditProgress:
    """How far one stage of an audit is: ``done`` of ``total`` rows (``total`` once known)."""

    stage: AuditStage
    done: int
    total: int | None


@dataclass(frozen=True, slots=True)
class AuditReport:
    """What an audit read and every difference it found (empty when the ledger is sound)."""

    accounts: int
    postings: int
    pending_movements: int
    open_pending_movements: int
    currencies: tuple[str, ...]
    differences: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Whether the ledger passed every check."""
        return not self.differences

    def as_dict(self) -> dict[str, object]:
        """The report as plain JSON-ready data."""
        return {
            "ok": self.ok,
            "accounts": self.accounts,
            "postings": self.postings,
            "pending_movements": self.pending_movements,
            "open_pending_movements": self.open_pending_movements,
            "currencies": list(self.currencies),
            "differences": list(self.differences),
        }


ProgressCallback = Callable[[AuditProgress], None]

#: The read transaction's view: the storage port's ``UnitOfWork`` when auditing a ``Storage``.
V = TypeVar("V", bound=LedgerView)

#: A check of the bank mirror accounts, run in the audit's snapshot after the ledger's own:
#: given the unit of work, every account by id and the postings of each ``bank`` account, it
#: returns the differences it finds.
BankMirrorCheck = Callable[
    [V, Mapping[str, Account], Mapping[str, Sequence[Posting]]], Iterable[str]
]


def audit_ledger(
    storage: LedgerSource[V],
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    progress: ProgressCallback | None = None,
    bank_mirrors: BankMirrorCheck[V] | None = None,
) -> AuditReport:
    """Audit the ledger in ``storage`` in one read-only snapshot; return what was found.

    ``progress`` is called as each stage advances (``accounts``, then ``postings`` page by page,
    then ``pendings``). It runs inside the read transaction, so it should be quick.
    ``bank_mirrors`` adds the check of the bank mirror accounts ([8]).
    """
    if page_size < 1:
        raise ValueError("page_size must be at least 1")
    report = progress or _ignore

    def audit(uow: V) -> AuditReport:
        return _Audit(uow, page_size, report, bank_mirrors).run()

    # snapshot=True: every read below sees the same committed state (see the module docstring).
    return storage.run_sync(audit, write=False, snapshot=True)


def _ignore(_: AuditProgress) -> None:
    """The progress callback when the caller gives none."""


class _Audit(Generic[V]):
    """One audit's running state, inside its read transaction."""

    def __init__(
        self,
        uow: V,
        page_size: int,
        progress: ProgressCallback,
        bank_mirrors: BankMirrorCheck[V] | None,
    ) -> None:
        self.uow = uow
        self.bank_mirrors = bank_mirrors
        self.bank_postings: dict[str, list[Posting]] = defaultdict(list)
        self.ledger = uow.ledger
        self.page_size = page_size
        self.progress = progress
        self.differences: list[str] = []
        self.accounts: dict[str, Account] = {}
        self.folds: dict[str, CounterDelta] = defaultdict(CounterDelta)
        # Two-phase postings wait here until their pending movement is read.
        self.reservations: dict[str, Posting] = {}
        self.resolutions: dict[str, list[Posting]] = defaultdict(list)
        # Open reservations per account, to compare with the stored pending counters.
        self.holds: Counter[str] = Counter()
        self.outgoing: Counter[str] = Counter()
        self.incoming: Counter[str] = Counter()

    def run(self) -> AuditReport:
        self._read_accounts()
        postings = self._fold_postings()
        pendings, open_pendings = self._check_pendings()
        self._check_accounts()
        if self.bank_mirrors is not None:
            self.differences.extend(
                self.bank_mirrors(self.uow, self.accounts, dict(self.bank_postings))
            )
        return AuditReport(
            accounts=len(self.accounts),
            postings=postings,
            pending_movements=pendings,
            open_pending_movements=open_pendings,
            currencies=tuple(sorted({a.currency for a in self.accounts.values()})),
            differences=tuple(self.differences),
        )

    def _read_accounts(self) -> None:
        for account in self.ledger.all_accounts():
            if account.id in self.accounts:
                self.differences.append(f"[3] account id {account.id} is stored twice")
            self.accounts[account.id] = account
        count = len(self.accounts)
        self.progress(AuditProgress("accounts", count, count))

    def _fold_postings(self) -> int:
        total = self.ledger.count_postings()
        self.progress(AuditProgress("postings", 0, total))
        done = 0
        after: str | None = None
        while True:
            page = self.ledger.postings_page(after, self.page_size)
            if not page:
                break
            for posting in page:
                self._fold(posting)
            done += len(page)
            after = page[-1].id
            self.progress(AuditProgress("postings", done, total))
        return done

    def _fold(self, posting: Posting) -> None:
        self.differences.extend(_posting_shape(posting, self.accounts))
        for account_id in {posting.debit_account_id, posting.credit_account_id}:
            account = self.accounts.get(account_id)
            if account is not None:  # an unknown one is reported by _posting_shape
                self.folds[account_id] = self.folds[account_id] + posting.delta_for(account_id)
                if account.kind is AccountKind.BANK:
                    self.bank_postings[account_id].append(posting)
        if posting.kind is PostingKind.PENDING:
            self.reservations[posting.id] = posting
        elif posting.kind in _RESOLUTION_KINDS and posting.pending_id is not None:
            self.resolutions[posting.pending_id].append(posting)

    def _check_pendings(self) -> tuple[int, int]:
        seen: set[str] = set()
        count = open_count = 0
        # Each pending movement has one reservation posting, so their number is the total to
        # expect (exact unless the ledger is damaged, which the checks then report).
        expected = len(self.reservations)
        self.progress(AuditProgress("pendings", 0, expected))
        for pending in self.ledger.pendings():
            if pending.id in seen:
                self.differences.append(f"[3] pending movement id {pending.id} is stored twice")
            seen.add(pending.id)
            count += 1
            open_count += self._check_pending(pending)
            if count % self.page_size == 0:
                self.progress(AuditProgress("pendings", count, max(expected, count)))
        for posting_id in sorted(self.reservations.keys() - seen):
            self.differences.append(f"[6] reservation posting {posting_id} has no pending movement")
        for pending_id in sorted(self.resolutions.keys() - seen):
            for posting in self.resolutions[pending_id]:
                self.differences.append(
                    f"[6] posting {posting.id} resolves unknown pending {pending_id}"
                )
        self.progress(AuditProgress("pendings", count, count))
        return count, open_count

    def _check_pending(self, pending: PendingMovement) -> int:
        """Check one pending movement; 1 if it is still open, else 0."""
        self.differences.extend(_reservation_matches(pending, self.reservations.get(pending.id)))
        self.differences.extend(_resolution_matches(pending, self.resolutions.get(pending.id, [])))
        if pending.status is not PendingStatus.PENDING:
            return 0
        if pending.category is PendingCategory.HOLD:
            self.holds[pending.debit_account_id] += pending.amount
        else:
            self.outgoing[pending.debit_account_id] += pending.amount
        self.incoming[pending.credit_account_id] += pending.amount
        return 1

    def _check_accounts(self) -> None:
        out = self.differences
        for account in self.accounts.values():
            folded = _counters(self.folds.get(account.id, CounterDelta()))
            for name, have, want in zip(_COUNTER_NAMES, _counters(account), folded, strict=True):
                if have != want:
                    out.append(
                        f"[3] account {account.id}: stored {name} is {have}, "
                        f"its postings fold to {want}"
                    )
        out.extend(_currencies_sum_to_zero(self.accounts.values()))
        for account in self.accounts.values():
            out.extend(_account_bounds(account))
        for account in self.accounts.values():
            for name, have, want in (
                ("debits_pending_holds", account.debits_pending_holds, self.holds[account.id]),
                ("debits_pending_out", account.debits_pending_out, self.outgoing[account.id]),
                ("credits_pending", account.credits_pending, self.incoming[account.id]),
            ):
                if have != want:
                    out.append(
                        f"[6] account {account.id}: {name} is {have}, its open pending "
                        f"movements reserve {want}"
                    )
