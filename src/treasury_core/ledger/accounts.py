"""Ledger accounts and their counters.

An account never stores a balance. It stores five counters, each the fold of its postings:
posted debits and credits, pending debits split by purpose (authorization-style *holds* and
outgoing withdrawals/transfers, *out*), and pending credits. Every figure of the interface's
balance record is derived from them, so a balance read costs one row whatever the history length.

Accounts are credit-normal (a wallet is money the platform owes its company): ``balance`` is
credits minus debits. A *guarded* account may not be debited past ``-overdraft_limit`` of
available funds; unguarded accounts (the outside world, FX liquidity, the mirrors of the
treasury's bank accounts) may go negative.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum


class AccountKind(StrEnum):
    """What an account stands for; only wallets belong to a company."""

    WALLET = "wallet"
    WORLD = "world"
    SETTLEMENT = "settlement"
    FEES = "fees"
    FX_LIQUIDITY = "fx_liquidity"
    #: Money at one of the treasury's bank accounts in one currency (its mirror).
    BANK = "bank"


@dataclass(frozen=True, slots=True)
class CounterDelta:
    """A change to an account's five counters; what one journal does to one account."""

    debits_posted: int = 0
    credits_posted: int = 0
    debits_pending_holds: int = 0
    debits_pending_out: int = 0
    credits_pending: int = 0

    def __add__(self, other: CounterDelta) -> CounterDelta:
        return CounterDelta(
            self.debits_posted + other.debits_posted,
            self.credits_posted + other.credits_posted,
            self.debits_pending_holds + other.debits_pending_holds,
            self.debits_pending_out + other.debits_pending_out,
            self.credits_pending + other.credits_pending,
        )

    @property
    def debit_exposure(self) -> int:
        """How much this change adds to the funds committed out of the account."""
        return self.debits_posted + self.debits_pending_holds + self.debits_pending_out

    @property
    def is_zero(self) -> bool:
        """True when the change leaves every counter as it was."""
        return not (
            self.debits_posted
            or self.credits_posted
            or self.debits_pending_holds
            or self.debits_pending_out
            or self.credits_pending
        )


@dataclass(frozen=True, slots=True)
class Account:
    """A ledger account in one currency, with its running counters (all ``int`` minor units)."""

    id: str
    currency: str
    kind: AccountKind
    company_id: int | None = None
    guarded: bool = False
    overdraft_limit: int = 0
    debits_posted: int = 0
    credits_posted: int = 0
    debits_pending_holds: int = 0
    debits_pending_out: int = 0
    credits_pending: int = 0

    @property
    def balance(self) -> int:
        """Posted funds: posted credits minus posted debits."""
        return self.credits_posted - self.debits_posted

    @property
    def pending_holds(self) -> int:
        """Funds reserved by holds (anything other than outgoing withdrawals and transfers)."""
        return self.debits_pending_holds

    @property
    def pending_out(self) -> int:
        """Funds reserved by pending withdrawals and transfers out of the account."""
        return self.debits_pending_out

    @property
    def pending_in(self) -> int:
        """Incoming funds not yet settled; they never count as available."""
        return self.credits_pending

    @property
    def available_balance(self) -> int:
        """``balance - pending_holds - pending_out``: what may still be withdrawn or transferred."""
        return self.balance - self.debits_pending_holds - self.debits_pending_out

    def with_delta(self, delta: CounterDelta) -> Account:
        """This account after ``delta``; the only way counters change."""
        return replace(
            self,
            debits_posted=self.debits_posted + delta.debits_posted,
            credits_posted=self.credits_posted + delta.credits_posted,
            debits_pending_holds=self.debits_pending_holds + delta.debits_pending_holds,
            debits_pending_out=self.debits_pending_out + delta.debits_pending_out,
            credits_pending=self.credits_pending + delta.credits_pending,
        )

    def counters(self) -> tuple[int, int, int, int, int]:
        """The five counters, in :class:`CounterDelta` field order."""
        return (
            self.debits_posted,
            self.credits_posted,
            self.debits_pending_holds,
            self.debits_pending_out,
            self.credits_pending,
        )
