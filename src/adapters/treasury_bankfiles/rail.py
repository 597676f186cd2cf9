"""The bank-file rail: the sandbox rail's formats, and files instead of timers.

:class:`FilesBankRail` is a :class:`~treasury_core.ports.BankRail` and a
:class:`~treasury_core.ports.BankFiles`. Account formats, checks and virtual account details
are the sandbox rail's (the same real checksums); EUR deposits are sent to the treasury's own
account (the debtor of its payment files); deposits and withdrawals never settle on a timer:
the bank's statement settles them. Cross-currency transfers keep the sandbox's delay (no file
carries them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schwifty import BIC, IBAN
from schwifty.exceptions import SchwiftyException

from treasury_bankfiles.camt import looks_like_camt, read_camt
from treasury_bankfiles.mt940 import read_mt940
from treasury_bankfiles.pain001 import pain001_file
from treasury_core.ports import (
    AccountFormat,
    BankAccountDetails,
    OutgoingPayment,
    PaymentFile,
    PaymentInstruction,
    Settlement,
    Statement,
    VirtualAccountDetails,
)
from treasury_sandbox.bank_rail import SandboxBankRail


@dataclass(frozen=True, slots=True)
class Debtor:
    """The treasury's own bank account: the debtor of its payment files."""

    name: str
    iban: str
    bic: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "iban", str(IBAN(self.iban)))
            if self.bic:
                object.__setattr__(self, "bic", str(BIC(self.bic)))
        except SchwiftyException as exc:
            raise ValueError(f"the debtor account is not valid: {exc}") from exc


class FilesBankRail:
    """pain.001 out, camt.053, camt.054 and MT940 in; everything else as the sandbox rail."""

    def __init__(
        self,
        debtor: Debtor,
        formats: SandboxBankRail | None = None,
        *,
        batch_booking: bool = True,
    ) -> None:
        self._debtor = debtor
        self._sandbox = formats or SandboxBankRail()
        self._batch_booking = batch_booking

    # --- BankRail: formats and coordinates are the sandbox rail's ------------------------------

    def account_formats(self) -> list[AccountFormat]:
        """The sandbox rail's formats."""
        return self._sandbox.account_formats()

    def bank_names(self, currency: str | None = None) -> list[str]:
        """The sandbox rail's bank names."""
        return self._sandbox.bank_names(currency)

    def validate_bank_account(self, details: BankAccountDetails) -> BankAccountDetails:
        """Checked as the sandbox rail checks (IBAN and BIC through schwifty)."""
        return self._sandbox.validate_bank_account(details)

    def deposit_instructions(self, currency: str, reference: str) -> list[PaymentInstruction]:
        """EUR: the treasury's own account; other currencies: the sandbox's."""
        if currency.strip().upper() != "EUR":
            return self._sandbox.deposit_instructions(currency, reference)
        name = f"{self._debtor.name} — ref {reference}" if reference else self._debtor.name
        return [
            PaymentInstruction(
                bank_name=self._debtor.name,
                account_name=name[:140],
                account_number=self._debtor.iban,
                routing_number=self._debtor.bic or "",
            )
        ]

    def virtual_account_details(self, currency: str, seed: str) -> VirtualAccountDetails:
        """The sandbox rail's virtual account coordinates."""
        return self._sandbox.virtual_account_details(currency, seed)

    def settlement_delay(self, kind: Settlement) -> timedelta | None:
        """Deposits and withdrawals: ``None`` (the statement settles them)."""
        if Settlement(kind) is Settlement.FX_TRANSFER:
            return self._sandbox.settlement_delay(kind)
        return None

    # --- BankFiles ----------------------------------------------------------------------------

    def cannot_carry(self, payment: OutgoingPayment) -> str | None:
        """Why a SEPA credit transfer cannot carry ``payment``, or ``None``."""
        if payment.currency != "EUR":
            return f"SEPA credit transfers carry EUR only; this withdrawal pays {payment.currency}"
        try:
            iban = IBAN(payment.creditor_account)
        except SchwiftyException:
            return "the bank account's number is not an IBAN"
        if not iban.in_sepa_zone:
            return f"the bank account's IBAN is outside the SEPA zone ({iban.country_code})"
        if payment.creditor_bic:
            try:
                BIC(payment.creditor_bic)
            except SchwiftyException:
                return "the bank account's BIC is not valid"
        return None

    def payment_file(
        self, batch_id: str, payments: list[OutgoingPayment], created_at: datetime
    ) -> PaymentFile:
        """A pain.001.001.03 file, validated against its schema."""
        return pain001_file(
            batch_id,
            payments,
            created_at,
            debtor_name=self._debtor.name,
            debtor_iban=self._debtor.iban,
            debtor_bic=self._debtor.bic,
            batch_booking=self._batch_booking,
        )

    def read_statements(self, data: bytes) -> tuple[Statement, ...]:
        """camt.053 or camt.054 when the data is XML, MT940 otherwise."""
        return read_camt(data) if looks_like_camt(data) else read_mt940(data)
