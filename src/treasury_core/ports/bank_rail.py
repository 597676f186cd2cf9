"""The bank rail port: payment instructions and settlement of bank movements (treasury issue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class PaymentInstruction:
    """Where to send funds for a deposit (one item of ``payment_instructions``)."""

    bank_name: str
    account_name: str
    account_number: str
    routing_number: str


@runtime_checkable
class BankRail(Protocol):
    """Instructions for deposits, and the settlement of deposits, withdrawals and transfers.

    Methods that *start* a bank movement move money in the outside world; the ledger records the
    result only when the rail confirms it.
    """

    async def deposit_instructions(self, currency: str, reference: str) -> list[PaymentInstruction]:
        """Bank details a payer sends ``currency`` to, quoting ``reference``. Moves nothing."""
        ...

    async def send_withdrawal(self, withdrawal_id: str, currency: str, amount: int) -> None:
        """Start paying ``amount`` out to a registered bank account. Moves money."""
        ...
