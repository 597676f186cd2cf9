"""Treasury records: deposits, withdrawals, transfers, bank accounts and virtual accounts.

The money of every movement lives in the ledger; these records describe the movements and carry
the ids of their pending ledger legs (:mod:`treasury_core.interface.records` renders them).
"""

from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    MovementError,
    MovementStatus,
    Transfer,
    TreasuryRecord,
    VirtualAccount,
    Withdrawal,
)

__all__ = [
    "BankAccount",
    "Deposit",
    "MovementError",
    "MovementStatus",
    "Transfer",
    "TreasuryRecord",
    "VirtualAccount",
    "Withdrawal",
]
