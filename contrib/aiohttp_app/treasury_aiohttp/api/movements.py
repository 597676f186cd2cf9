"""Endpoints of parts 4.4–4.7: deposits, bank accounts, withdrawals, transfers, virtual accounts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel

from treasury_aiohttp.api.shapes import create_one, get_one, list_records
from treasury_aiohttp.io import (
    treasury,
)
from treasury_aiohttp.query import filters
from treasury_aiohttp.routing import Param, Route
from treasury_core.interface.projections import record_json
from treasury_core.interface.projections import record_of as record_model
from treasury_core.interface.records import (
    BankAccountRecord,
    DepositRecord,
    TransferRecord,
    VirtualAccountRecord,
    WithdrawalRecord,
)
from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    MovementStatus,
    Transfer,
    TreasuryRecord,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.movements.requests import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateVirtualAccountRequest,
    CreateWithdrawalRequest,
    RegisterBankAccountRequest,
)
from treasury_core.ports import AccountFormat
from treasury_core.validation import CurrencyCode

T = TypeVar("T", bound=TreasuryRecord)


class FormatFieldRecord(BaseModel):
    """One field of a bank-account format."""

    name: str
    pattern: str
    description: str
    example: str


class AccountFormatRecord(BaseModel):
    """The fields a bank account in one currency needs (``GET /bank-account/formats``)."""

    currency_id: str
    name: str
    fields: list[FormatFieldRecord]

    @classmethod
    def of(cls, fmt: AccountFormat) -> AccountFormatRecord:
        """The record of a rail's format."""
        return cls(
            currency_id=fmt.currency,
            name=fmt.name,
            fields=[
                FormatFieldRecord(
                    name=f.name, pattern=f.pattern, description=f.description, example=f.example
                )
                for f in fmt.fields
            ],
        )


class BankNamesRecord(BaseModel):
    """Known bank names for one currency (``GET /bank-account/bank-names``)."""

    currency_id: str
    bank_names: list[str]


def record_of(item: TreasuryRecord) -> bytes:
    """The interface's record of a treasury record as JSON (what responses and replays carry)."""
    return record_json(item)


async def _create(
    request: web.Request, body_model: type[BaseModel], create: Callable[..., Any]
) -> web.StreamResponse:
    return await create_one(request, body_model, create, record_of)


async def _list(
    request: web.Request, kind: type[TreasuryRecord], model: type[BaseModel]
) -> web.StreamResponse:
    return await list_records(request, kind, model, record_model)


async def create_deposit(request: web.Request) -> web.StreamResponse:
    """Announce a deposit; the response carries the bank details to send the funds to."""
    return await _create(request, CreateDepositRequest, treasury(request).deposits.create)


async def get_deposit(request: web.Request) -> web.StreamResponse:
    """One deposit."""
    return await get_one(request, treasury(request).deposits.get, "deposit_id", record_of)


async def register_bank_account(request: web.Request) -> web.StreamResponse:
    """Register a withdrawal destination, checked against its currency's format."""
    return await _create(
        request, RegisterBankAccountRequest, treasury(request).bank_accounts.register
    )


async def bank_account_formats(request: web.Request) -> web.StreamResponse:
    """The bank-account format of every enabled currency."""
    formats = [AccountFormatRecord.of(f) for f in treasury(request).bank_accounts.formats()]
    return web.json_response([f.model_dump(mode="json") for f in formats])


async def bank_names(request: web.Request) -> web.StreamResponse:
    """Known bank names per enabled currency (``?currency=USD`` for one)."""
    t = treasury(request)
    wanted = request.query.get("currency")
    codes = (
        [t.currencies.get(wanted, param="currency").code]
        if wanted is not None
        else [c.code for c in t.currencies]
    )
    records = [
        BankNamesRecord(currency_id=code, bank_names=t.bank_accounts.bank_names(code))
        for code in codes
    ]
    return web.json_response([r.model_dump(mode="json") for r in records])


async def create_withdrawal(request: web.Request) -> web.StreamResponse:
    """Send wallet funds to a registered bank account; amount and fee are reserved at once."""
    return await _create(request, CreateWithdrawalRequest, treasury(request).withdrawals.create)


async def get_withdrawal(request: web.Request) -> web.StreamResponse:
    """One withdrawal."""
    return await get_one(request, treasury(request).withdrawals.get, "withdraw_id", record_of)


async def list_withdrawals(request: web.Request) -> web.StreamResponse:
    """The company's withdrawals, newest first."""
    return await _list(request, Withdrawal, WithdrawalRecord)


async def create_transfer(request: web.Request) -> web.StreamResponse:
    """Move funds between two wallets of the company, converting if their currencies differ."""
    return await _create(request, CreateTransferRequest, treasury(request).transfers.create)


async def get_transfer(request: web.Request) -> web.StreamResponse:
    """One transfer."""
    return await get_one(request, treasury(request).transfers.get, "transfer_id", record_of)


async def list_transfers(request: web.Request) -> web.StreamResponse:
    """The company's transfers, newest first."""
    return await _list(request, Transfer, TransferRecord)


async def create_virtual_account(request: web.Request) -> web.StreamResponse:
    """Dedicated bank details for a wallet (currencies with ``can_vban``)."""
    return await _create(
        request, CreateVirtualAccountRequest, treasury(request).virtual_accounts.create
    )


async def list_virtual_accounts(request: web.Request) -> web.StreamResponse:
    """The company's virtual accounts, newest first."""
    return await _list(request, VirtualAccount, VirtualAccountRecord)


_TREASURY = ("Treasury",)

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/deposit",
        create_deposit,
        "Create a deposit",
        body=CreateDepositRequest,
        response=DepositRecord,
        tags=("Deposits",),
    ),
    Route(
        "GET",
        "/api/v1/deposit/{deposit_id}",
        get_deposit,
        "Get a deposit",
        response=DepositRecord,
        tags=("Deposits",),
        path_params={"deposit_id": "Deposit id (`dep_…`)."},
    ),
    Route(
        "POST",
        "/api/v1/bank-account",
        register_bank_account,
        "Register a bank account",
        body=RegisterBankAccountRequest,
        response=BankAccountRecord,
        tags=("Bank accounts",),
    ),
    Route(
        "GET",
        "/api/v1/bank-account/formats",
        bank_account_formats,
        "Bank-account formats",
        response=AccountFormatRecord,
        is_list=True,
        paged=False,
        tags=("Bank accounts",),
    ),
    Route(
        "GET",
        "/api/v1/bank-account/bank-names",
        bank_names,
        "Known bank names",
        response=BankNamesRecord,
        is_list=True,
        paged=False,
        tags=("Bank accounts",),
        query_params={"currency": Param("Only this currency's banks.", CurrencyCode)},
    ),
    Route(
        "POST",
        "/api/v1/withdraw",
        create_withdrawal,
        "Create a withdrawal",
        body=CreateWithdrawalRequest,
        response=WithdrawalRecord,
        tags=("Withdrawals",),
    ),
    Route(
        "GET",
        "/api/v1/withdraw/{withdraw_id}",
        get_withdrawal,
        "Get a withdrawal",
        response=WithdrawalRecord,
        tags=("Withdrawals",),
        path_params={"withdraw_id": "Withdrawal id (`wdr_…`)."},
    ),
    Route(
        "GET",
        "/api/v1/withdrawals",
        list_withdrawals,
        "List withdrawals",
        response=WithdrawalRecord,
        is_list=True,
        tags=("Withdrawals",),
        query_params=filters(
            "wallet_id",
            "bank_account_id",
            "currency",
            "metadata",
            statuses=MovementStatus,
            noun="withdrawals",
        ),
    ),
    Route(
        "POST",
        "/api/v1/transfer",
        create_transfer,
        "Create a transfer",
        body=CreateTransferRequest,
        response=TransferRecord,
        tags=("Transfers",),
    ),
    Route(
        "GET",
        "/api/v1/transfer/{transfer_id}",
        get_transfer,
        "Get a transfer",
        response=TransferRecord,
        tags=("Transfers",),
        path_params={"transfer_id": "Transfer id (`trf_…`)."},
    ),
    Route(
        "GET",
        "/api/v1/transfers",
        list_transfers,
        "List transfers",
        response=TransferRecord,
        is_list=True,
        tags=("Transfers",),
        query_params=filters(
            "wallet_id", "currency", "metadata", statuses=MovementStatus, noun="transfers"
        ),
    ),
    Route(
        "POST",
        "/api/v1/virtual-account",
        create_virtual_account,
        "Create a virtual account",
        body=CreateVirtualAccountRequest,
        response=VirtualAccountRecord,
        tags=("Virtual accounts",),
    ),
    Route(
        "GET",
        "/api/v1/virtual-accounts",
        list_virtual_accounts,
        "List virtual accounts",
        response=VirtualAccountRecord,
        is_list=True,
        tags=("Virtual accounts",),
        query_params=filters(
            "wallet_id", "currency", "metadata", statuses=Literal["active"], noun="virtual accounts"
        ),
    ),
)

__all__ = ["ROUTES", "BankAccount", "Deposit", "Transfer", "VirtualAccount", "Withdrawal"]
