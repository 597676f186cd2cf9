"""The wallet entity, its API record (part 2.3), and the create request.

A wallet is a company's balance in one currency. Its money lives in the ledger account with the
same id; the wallet row holds only what describes it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from treasury_core.currency import Currency
from treasury_core.metadata import MetadataField, MetadataInput
from treasury_core.serialization import Timestamp
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


class WalletRecord(BaseModel):
    """A wallet as the interface returns it; ``company_id`` is a string there (part 2.3)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    description: str | None
    company_id: str
    currency: CurrencyObject
    status: WalletStatus
    created_at: Timestamp
    #: Added after the interface's fields (issue 24).
    metadata: MetadataField = {}

    @classmethod
    def of(cls, wallet: Wallet, currency: Currency) -> WalletRecord:
        """The record of ``wallet`` whose currency is ``currency``."""
        return cls(
            id=wallet.id,
            name=wallet.name,
            description=wallet.description,
            company_id=str(wallet.company_id),
            currency=CurrencyObject.of(currency),
            status=wallet.status,
            created_at=wallet.created_at,
            metadata=wallet.metadata,
        )


class CreateWalletRequest(StrictRequest):
    """``POST /api/v1/wallet``: ``name`` and ``currency_id`` required, ``description`` optional."""

    name: Name = Field(description="Display name of the wallet.")
    currency_id: CurrencyCode = Field(description="ISO 4217 code of an enabled currency.")
    description: Description | None = Field(default=None, description="Free text.")
    metadata: MetadataInput | None = None
