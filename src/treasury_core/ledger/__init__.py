"""The double-entry ledger kernel: accounts, postings, two-phase movements, balances. Pure."""

from treasury_core.ledger.accounts import Account, AccountKind, CounterDelta
from treasury_core.ledger.balance import BalanceRecord
from treasury_core.ledger.journal import (
    ExpirePending,
    Journal,
    Leg,
    Move,
    PostPending,
    Reserve,
    VoidPending,
)
from treasury_core.ledger.kernel import (
    LedgerPlan,
    apply_plan,
    check_account,
    duplicate_journal,
    plan_journal,
    referenced_pendings,
)
from treasury_core.ledger.postings import (
    PendingCategory,
    PendingMovement,
    PendingStatus,
    Posting,
    PostingKind,
    fold_postings,
)

__all__ = [
    "Account",
    "AccountKind",
    "BalanceRecord",
    "CounterDelta",
    "ExpirePending",
    "Journal",
    "LedgerPlan",
    "Leg",
    "Move",
    "PendingCategory",
    "PendingMovement",
    "PendingStatus",
    "PostPending",
    "Posting",
    "PostingKind",
    "Reserve",
    "VoidPending",
    "apply_plan",
    "check_account",
    "duplicate_journal",
    "fold_postings",
    "plan_journal",
    "referenced_pendings",
]
