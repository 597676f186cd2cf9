"""The wallet entity (part 2.3), the currency object its record shows, and the create request.

A wallet is a company's balance in one currency. Its money lives in the ledger account with the
same id; the wallet row holds only what describes it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from treasury_core.currency import Currency
from treasury_core.metadata import MetadataField, MetadataInput
from treasury_core.validation import CurrencyCode, Description, Name, StrictRequest


class WalletStatus(StrEnum):
    """A wallet's status; ``active`` is the only one the interface names."""

    ACTIVE = "active"


class Wallet(BaseModel):
    """A company's wallet in one currency (the entity as stored)."""

    model_config = ConfigDict(frozen=True)

    id: str
    company_id: int
    name: str
    description: str | None
    currency: str
    status: WalletStatus
    created_at: datetime
    metadata: MetadataField = {}


class CurrencyObject(BaseModel):
    """The ``currency`` object of a wallet record."""

    model_config = ConfigDict(frozen=True)

    code: str
    name: str
    currency_type: str
    symbol: str

    @classmethod
    def of(cls, currency: Currency) -> CurrencyObject:
        """The object for ``currency``."""
        return cls(
            code=currency.code,
            name=currency.name,
            currency_type=currency.currency_type,
            symbol=currency.symbol,
        )


class CreateWalletRequest(StrictRequest):
    """``POST /api/v1/wallet``: ``name`` and ``currency_id`` required, ``description`` optional."""

    name: Name = Field(description="Display name of the wallet.")
    currency_id: CurrencyCode = Field(description="ISO 4217 code of an enabled currency.")
    description: Description | None = Field(default=None, description="Free text.")
    metadata: MetadataInput | None = None
