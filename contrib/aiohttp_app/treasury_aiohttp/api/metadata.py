"""``POST …/{id}/metadata`` of the treasury records and PMTIs (decisions.md, "Metadata").

One handler per kind, made by :func:`_metadata_handler`: the pairs in the body are merged into
the record's metadata (``""`` deletes a key) and the record is answered as its ``GET`` answers
it (a PMTI's ``latest_version`` URLs excepted: they hold secrets, and a stored idempotent answer
must not; ``GET`` the PMTI for them). Payment intents have theirs in :mod:`link_handlers`.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel

from treasury_aiohttp.api.shapes import act
from treasury_aiohttp.api.wallets import wallet_renderer
from treasury_aiohttp.io import treasury
from treasury_aiohttp.routing import Handler, Route
from treasury_core.cards.tokens import TokenIntent
from treasury_core.interface.projections import record_json
from treasury_core.interface.records import (
    BankAccountRecord,
    DepositRecord,
    TokenIntentRecord,
    TransferRecord,
    VirtualAccountRecord,
    WalletRecord,
    WithdrawalRecord,
)
from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    Transfer,
    TreasuryRecord,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.payments.requests import MetadataUpdateRequest
from treasury_core.services.record_metadata import update_record_metadata


def _record_of(item: TreasuryRecord) -> bytes:
    return record_json(item)


def _metadata_handler(kind: type[TreasuryRecord], noun: str, param: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        storage, record_id = treasury(request).storage, request.match_info[param]
        return await act(
            request,
            MetadataUpdateRequest,
            _record_of,
            lambda company, body, ticket: update_record_metadata(
                storage,
                kind,
                company,
                record_id,
                body.metadata,
                noun=noun,
                param=param,
                idempotency=ticket,
            ),
        )

    handler.__name__ = f"update_{kind.__name__.lower()}_metadata"
    handler.__doc__ = f"Merge pairs into a {noun}'s metadata; an empty value deletes its key."
    return handler


async def update_wallet_metadata(request: web.Request) -> web.StreamResponse:
    """Merge pairs into a wallet's metadata; an empty value deletes its key."""
    service, wallet_id = treasury(request).wallets, request.match_info["wallet_id"]
    return await act(
        request,
        MetadataUpdateRequest,
        wallet_renderer(request),
        lambda company, body, ticket: service.update_metadata(
            company, wallet_id, body.metadata, idempotency=ticket
        ),
    )


#: (path, kind, noun, path parameter, its description, response model)
_KINDS: tuple[tuple[str, type[TreasuryRecord], str, str, str, type[BaseModel]], ...] = (
    ("/api/v1/deposit/{deposit_id}", Deposit, "deposit", "deposit_id", "`dep_…`", DepositRecord),
    (
        "/api/v1/withdraw/{withdraw_id}",
        Withdrawal,
        "withdrawal",
        "withdraw_id",
        "`wdr_…`",
        WithdrawalRecord,
    ),
    (
        "/api/v1/transfer/{transfer_id}",
        Transfer,
        "transfer",
        "transfer_id",
        "`trf_…`",
        TransferRecord,
    ),
    (
        "/api/v1/bank-account/{bank_account_id}",
        BankAccount,
        "bank account",
        "bank_account_id",
        "`ba_…`",
        BankAccountRecord,
    ),
    (
        "/api/v1/virtual-account/{virtual_account_id}",
        VirtualAccount,
        "virtual account",
        "virtual_account_id",
        "`va_…`",
        VirtualAccountRecord,
    ),
    (
        "/api/v1/payment_method_token_intent/{pmti_id}",
        TokenIntent,
        "payment method token intent",
        "pmti_id",
        "`pmti_…`",
        TokenIntentRecord,
    ),
)

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/wallet/{wallet_id}/metadata",
        update_wallet_metadata,
        "Update a wallet's metadata",
        body=MetadataUpdateRequest,
        response=WalletRecord,
        tags=("Wallets",),
        path_params={"wallet_id": "Wallet id (`wal_…`)."},
        description='The pairs are merged into the metadata; `""` deletes a key.',
    ),
    *tuple(
        Route(
            "POST",
            f"{path}/metadata",
            _metadata_handler(kind, noun, param),
            f"Update a {noun}'s metadata",
            body=MetadataUpdateRequest,
            response=response,
            tags=("Treasury",) if kind is not TokenIntent else ("Card on file",),
            path_params={param: f"The {noun}'s id ({shape})."},
            description='The pairs are merged into the metadata; `""` deletes a key.'
            + (
                " `latest_version`'s URLs are null in this answer: `GET` the PMTI for them."
                if kind is TokenIntent
                else ""
            ),
        )
        for path, kind, noun, param, shape, response in _KINDS
    ),
)
