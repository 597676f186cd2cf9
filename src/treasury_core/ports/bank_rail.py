"""The bank rail port: the outside banking world as the treasury sees it.

A rail knows which bank-account formats it can pay out to (and checks details against them),
which bank details a payer should send a deposit to, which account details a virtual account
gets, and how long each kind of bank movement takes to settle. The ledger records a movement as
pending when it starts and posts it when the rail confirms it; the rail itself never touches
balances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class PaymentInstruction:
    """Where to send funds for a deposit (one item of ``payment_instructions``)."""

    bank_name: str
    account_name: str
    account_number: str
    routing_number: str


@dataclass(frozen=True, slots=True)
class BankAccountDetails:
    """A withdrawal destination as registered (part 2.5), after the rail has normalized it."""

    bank_name: str
    account_name: str
    account_number: str
    routing_number: str
    currency: str


@dataclass(frozen=True, slots=True)
class FormatField:
    """One field of a bank-account format: its name, a regular expression, and an example."""

    name: str
    pattern: str
    description: str
    example: str


@dataclass(frozen=True, slots=True)
class AccountFormat:
    """The fields a bank account in ``currency`` needs, and what each must look like."""

    currency: str
    name: str
    fields: tuple[FormatField, ...]


@dataclass(frozen=True, slots=True)
class VirtualAccountDetails:
    """The bank coordinates of a virtual account; which are set depends on currency and region."""

    account_name: str
    bank_name: str
    account_number: str | None = None
    routing_number: str | None = None
    iban: str | None = None
    bic: str | None = None
    sort_code: str | None = None
    branch_code: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


class Settlement(StrEnum):
    """The kinds of bank movement a rail settles."""

    DEPOSIT = "deposit"
    WITHDRAWAL = "withdrawal"
    FX_TRANSFER = "fx_transfer"


@runtime_checkable
class BankRail(Protocol):
    """The banking side of the treasury. Nothing here moves ledger money."""

    def account_formats(self) -> list[AccountFormat]:
        """Every currency's bank-account format this rail can pay out to."""
        ...

    def bank_names(self, currency: str | None = None) -> list[str]:
        """Names of the banks this rail knows (for ``currency``, or all), sorted."""
        ...

    def validate_bank_account(self, details: BankAccountDetails) -> BankAccountDetails:
        """The details normalized (spaces removed, upper-cased IBAN, …).

        Raises ``ValidationFailed`` naming the failing field (``param``) when a field does not
        match its currency's format or fails its checksum (ABA routing, IBAN, sort code), and
        ``UnknownCurrency`` (param ``currency_id``) for a currency with no format.
        """
        ...

    def deposit_instructions(self, currency: str, reference: str) -> list[PaymentInstruction]:
        """Bank details a payer sends ``currency`` to, quoting ``reference``. Deterministic."""
        ...

    def virtual_account_details(self, currency: str, seed: str) -> VirtualAccountDetails:
        """Account details for a new virtual account, derived deterministically from ``seed``."""
        ...

    def settlement_delay(self, kind: Settlement) -> timedelta | None:
        """How long after creation a movement of ``kind`` settles on its own; ``None`` when it
        never does (a rail that exchanges files with a bank: its statement settles it)."""
        ...
