"""The bank-file rail's settings: ``TREASURY_BANK_BATCH_BOOKING``.

The debtor (``TREASURY_BANK_DEBTOR_NAME``, ``_IBAN``, ``_BIC``) is the treasury's own paying
account, which the core matches bank statements against, so it stays a core setting; this rail
reads it from the core's config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from treasury_core.config import AdapterSettings

if TYPE_CHECKING:
    from treasury_core.config import TreasuryConfig


class BankFilesSettings(AdapterSettings):
    """How the ``files`` rail writes its payment files."""

    env_prefix: ClassVar[str] = "TREASURY_BANK_"

    batch_booking: bool = Field(
        default=True,
        description="Ask the bank to book each payment file as one debit (pain.001 BtchBookg) "
        "rather than one debit per transfer.",
    )

    def missing(self, config: TreasuryConfig) -> list[str]:
        """The debtor, when ``config`` picks the ``files`` rail."""
        if config.bank_rail == "files" and not (
            config.bank_debtor_name and config.bank_debtor_iban
        ):
            return [
                "TREASURY_BANK_DEBTOR_NAME and TREASURY_BANK_DEBTOR_IBAN are required when "
                "TREASURY_BANK_RAIL=files"
            ]
        return []
