"""Request bodies of the treasury calls (part 4.4–4.7), validated strictly.

Amounts are integers (minor units); ``"100"``, ``true`` and ``1.5`` are refused. Positivity
is checked here, the configured maximum by the services.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from treasury_core.metadata import MetadataInput
from treasury_core.validation import (
    Amount,
    CurrencyCode,
    Description,
    Name,
    SingleLine,
    StrictRequest,
    VbanCurrencyCode,
)

Id = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Reference = Annotated[SingleLine, StringConstraints(max_length=255)]
Seconds = Annotated[int, Field(gt=0, le=10 * 365 * 24 * 3600)]


class CreateDepositRequest(StrictRequest):
    """``POST /api/v1/deposit``."""

    wallet_id: Id
    from_amount: Amount
    from_currency_id: CurrencyCode
    reference: Reference | None = None
    description: Description | None = None
    metadata: MetadataInput | None = None


class RegisterBankAccountRequest(StrictRequest):
    """``POST /api/v1/bank-account``."""

    bank_name: Name
    account_name: Name
    account_number: Annotated[SingleLine, StringConstraints(min_length=1, max_length=64)]
    routing_number: Annotated[SingleLine, StringConstraints(min_length=1, max_length=64)]
    currency_id: CurrencyCode
    metadata: MetadataInput | None = None


class CreateWithdrawalRequest(StrictRequest):
    """``POST /api/v1/withdraw``; ``to_currency_id`` defaults to the bank account's currency."""

    wallet_id: Id
    from_amount: Amount
    from_currency_id: CurrencyCode
    to_currency_id: CurrencyCode | None = None
    bank_account_id: Id
    reference: Reference | None = None
    description: Description | None = None
    metadata: MetadataInput | None = None


class CreateTransferRequest(StrictRequest):
    """``POST /api/v1/transfer``."""

    from_wallet_id: Id
    to_wallet_id: Id
    from_amount: Amount
    reference: Reference | None = None
    description: Description | None = None
    metadata: MetadataInput | None = None


class CreateVirtualAccountRequest(StrictRequest):
    """``POST /api/v1/virtual-account``."""

    wallet_id: Id
    source_currency: VbanCurrencyCode
    metadata: MetadataInput | None = None


class SandboxCompleteRequest(StrictRequest):
    """``POST /api/v1/sandbox/deposits/{id}/complete``: the amount received, if not as expected."""

    amount: Amount | None = None


class SandboxIncomingRequest(StrictRequest):
    """``POST /api/v1/sandbox/virtual-accounts/{id}/incoming``."""

    amount: Amount
    reference: Reference | None = None


class ClockAdvanceRequest(StrictRequest):
    """``POST /api/v1/sandbox/clock/advance``."""

    seconds: Seconds


class SandboxFailRequest(StrictRequest):
    """``POST /api/v1/sandbox/{deposits,withdrawals,transfers}/{id}/fail``: optional reason."""

    code: Annotated[SingleLine, StringConstraints(min_length=1, max_length=64)] | None = None
    message: Reference | None = None
