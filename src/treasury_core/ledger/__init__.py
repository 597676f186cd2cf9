"""The double-entry ledger kernel: accounts, postings, two-phase movements, balances. Pure."""

from treasury_core.ledger.accounts import Account, AccountKind, CounterDelta
from treasury_core.ledger.apply import LedgerSteps, PostingExists, apply_journal
from treasury_core.ledger.balance import BalanceRecord
from treasury_core.ledger.history import (
    EntryCounter,
    EntryPosition,
    EntryQuery,
    EntryType,
    WalletEntry,
    entry_id,
    wallet_entries,
)
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
    "EntryCounter",
    "EntryPosition",
    "EntryQuery",
    "EntryType",
    "ExpirePending",
    "Journal",
    "LedgerPlan",
    "LedgerSteps",
    "Leg",
    "Move",
    "PendingCategory",
    "PendingMovement",
    "PendingStatus",
    "PostPending",
    "Posting",
    "PostingExists",
    "PostingKind",
    "Reserve",
    "VoidPending",
    "WalletEntry",
    "apply_journal",
    "apply_plan",
    "check_account",
    "duplicate_journal",
    "entry_id",
    "fold_postings",
    "plan_journal",
    "referenced_pendings",
    "wallet_entries",
]
