"""Sandbox controls (decisions.md): settle movements by hand and move business time forward.

Served only in sandbox mode, with a secret key.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel

from treasury_aiohttp.io import Responder, json_response, parse_body, principal, treasury
from treasury_aiohttp.routing import Route
from treasury_core.serialization import Timestamp
from treasury_core.treasury.records import (
    Deposit,
    DepositRecord,
    Transfer,
    TransferRecord,
    TreasuryRecord,
    Withdrawal,
    WithdrawalRecord,
)
from treasury_core.treasury.requests import (
    ClockAdvanceRequest,
    SandboxCompleteRequest,
    SandboxFailRequest,
    SandboxIncomingRequest,
)


class ClockRecord(BaseModel):
    """The sandbox clock after an advance."""

    now: Timestamp


async def advance_clock(request: web.Request) -> web.StreamResponse:
    """Advance business time and run every job that falls due (settlements, expiries)."""
    body = await parse_body(request, ClockAdvanceRequest)
    now = await treasury(request).sandbox.advance(body.seconds)
    return json_response(ClockRecord(now=now))


async def complete_deposit(request: web.Request) -> web.StreamResponse:
    """The funds arrived (``amount``: what arrived, if not what was announced)."""
    body = await parse_body(request, SandboxCompleteRequest)
    responder: Responder[Deposit] = Responder(request, _record)
    result = await treasury(request).deposits.complete(
        request.match_info["deposit_id"],
        company_id=principal(request).company_id,
        idempotency=responder.ticket(),
        amount=body.amount,
    )
    return responder.respond(result)


async def fail_deposit(request: web.Request) -> web.StreamResponse:
    """The funds never arrived."""
    body = await parse_body(request, SandboxFailRequest)
    responder: Responder[Deposit] = Responder(request, _record)
    result = await treasury(request).deposits.fail(
        request.match_info["deposit_id"],
        company_id=principal(request).company_id,
        idempotency=responder.ticket(),
        **_reason(body),
    )
    return responder.respond(result)


async def complete_withdrawal(request: web.Request) -> web.StreamResponse:
    """The bank paid the withdrawal out."""
    await parse_body(request, _Empty)
    responder: Responder[Withdrawal] = Responder(request, _record)
    result = await treasury(request).withdrawals.complete(
        request.match_info["withdraw_id"],
        company_id=principal(request).company_id,
        idempotency=responder.ticket(),
    )
    return responder.respond(result)


async def fail_withdrawal(request: web.Request) -> web.StreamResponse:
    """The bank rejected the payout; amount and fee go back to the wallet."""
    body = await parse_body(request, SandboxFailRequest)
    responder: Responder[Withdrawal] = Responder(request, _record)
    result = await treasury(request).withdrawals.fail(
        request.match_info["withdraw_id"],
        company_id=principal(request).company_id,
        idempotency=responder.ticket(),
        **_reason(body),
    )
    return responder.respond(result)


async def complete_transfer(request: web.Request) -> web.StreamResponse:
    """The currency conversion settled."""
    await parse_body(request, _Empty)
    responder: Responder[Transfer] = Responder(request, _record)
    result = await treasury(request).transfers.complete(
        request.match_info["transfer_id"],
        company_id=principal(request).company_id,
        idempotency=responder.ticket(),
    )
    return responder.respond(result)


async def fail_transfer(request: web.Request) -> web.StreamResponse:
    """The conversion failed; the funds go back to the source wallet."""
    body = await parse_body(request, SandboxFailRequest)
    responder: Responder[Transfer] = Responder(request, _record)
    result = await treasury(request).transfers.fail(
        request.match_info["transfer_id"],
        company_id=principal(request).company_id,
        idempotency=responder.ticket(),
        **_reason(body),
    )
    return responder.respond(result)


async def virtual_account_incoming(request: web.Request) -> web.StreamResponse:
    """Funds arrive at a virtual account: a completed deposit credits its wallet."""
    body = await parse_body(request, SandboxIncomingRequest)
    responder: Responder[Deposit] = Responder(request, _record)
    result = await treasury(request).virtual_accounts.incoming(
        request.match_info["virtual_account_id"],
        body.amount,
        body.reference,
        company_id=principal(request).company_id,
        idempotency=responder.ticket(),
    )
    return responder.respond(result)


def _record(item: TreasuryRecord) -> BaseModel:
    return item.record()


class _Empty(BaseModel):
    """No fields: the body must be empty or ``{}``."""

    model_config = SandboxCompleteRequest.model_config


def _reason(body: SandboxFailRequest) -> dict[str, str]:
    reason: dict[str, str] = {}
    if body.code is not None:
        reason["code"] = body.code
    if body.message is not None:
        reason["message"] = body.message
    return reason


_SANDBOX = ("Sandbox",)
_DEP = {"deposit_id": "Deposit id (`dep_…`)."}
_WDR = {"withdraw_id": "Withdrawal id (`wdr_…`)."}
_TRF = {"transfer_id": "Transfer id (`trf_…`)."}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/sandbox/clock/advance",
        advance_clock,
        "Advance the sandbox clock",
        body=ClockAdvanceRequest,
        response=ClockRecord,
        tags=_SANDBOX,
    ),
    Route(
        "POST",
        "/api/v1/sandbox/deposits/{deposit_id}/complete",
        complete_deposit,
        "Complete a deposit",
        body=SandboxCompleteRequest,
        response=DepositRecord,
        tags=_SANDBOX,
        path_params=_DEP,
    ),
    Route(
        "POST",
        "/api/v1/sandbox/deposits/{deposit_id}/fail",
        fail_deposit,
        "Fail a deposit",
        body=SandboxFailRequest,
        response=DepositRecord,
        tags=_SANDBOX,
        path_params=_DEP,
    ),
    Route(
        "POST",
        "/api/v1/sandbox/withdrawals/{withdraw_id}/complete",
        complete_withdrawal,
        "Complete a withdrawal",
        body=_Empty,
        response=WithdrawalRecord,
        tags=_SANDBOX,
        path_params=_WDR,
    ),
    Route(
        "POST",
        "/api/v1/sandbox/withdrawals/{withdraw_id}/fail",
        fail_withdrawal,
        "Fail a withdrawal",
        body=SandboxFailRequest,
        response=WithdrawalRecord,
        tags=_SANDBOX,
        path_params=_WDR,
    ),
    Route(
        "POST",
        "/api/v1/sandbox/transfers/{transfer_id}/complete",
        complete_transfer,
        "Complete a transfer",
        body=_Empty,
        response=TransferRecord,
        tags=_SANDBOX,
        path_params=_TRF,
    ),
    Route(
        "POST",
        "/api/v1/sandbox/transfers/{transfer_id}/fail",
        fail_transfer,
        "Fail a transfer",
        body=SandboxFailRequest,
        response=TransferRecord,
        tags=_SANDBOX,
        path_params=_TRF,
    ),
    Route(
        "POST",
        "/api/v1/sandbox/virtual-accounts/{virtual_account_id}/incoming",
        virtual_account_incoming,
        "Receive funds at a virtual account",
        body=SandboxIncomingRequest,
        response=DepositRecord,
        tags=_SANDBOX,
        path_params={"virtual_account_id": "Virtual account id (`va_…`)."},
    ),
)
