"""Treasury records: deposits, withdrawals, transfers, bank accounts and virtual accounts.

The money of every movement lives in the ledger; these records describe the movements and carry
the ids of their pending ledger legs. Each record renders itself as the interface's record.
"""

from treasury_core.movements.records import (
    BankAccount,
    BankAccountRecord,
    Deposit,
    DepositRecord,
    MovementError,
    MovementStatus,
    Transfer,
    TransferRecord,
    TreasuryRecord,
    VirtualAccount,
    VirtualAccountRecord,
    Withdrawal,
    WithdrawalRecord,
)

__all__ = [
    "BankAccount",
    "BankAccountRecord",
    "Deposit",
    "DepositRecord",
    "MovementError",
    "MovementStatus",
    "Transfer",
    "TransferRecord",
    "TreasuryRecord",
    "VirtualAccount",
    "VirtualAccountRecord",
    "Withdrawal",
    "WithdrawalRecord",
]
