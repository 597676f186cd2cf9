"""Sandbox controls (decisions.md): settle movements by hand and move business time forward.

Served only in sandbox mode, with a secret key.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel

from treasury_aiohttp.api.movements import record_of
from treasury_aiohttp.api.shapes import act
from treasury_aiohttp.io import json_response, parse_body, treasury
from treasury_aiohttp.routing import Handler, Route
from treasury_core.interface.records import DepositRecord, TransferRecord, WithdrawalRecord
from treasury_core.movements.requests import (
    ClockAdvanceRequest,
    SandboxCompleteRequest,
    SandboxFailRequest,
    SandboxIncomingRequest,
)
from treasury_core.serialization import Timestamp


class ClockRecord(BaseModel):
    """The sandbox clock: the business time (after an advance, the new one)."""

    now: Timestamp


async def advance_clock(request: web.Request) -> web.StreamResponse:
    """Advance business time and run every job that falls due (settlements, expiries)."""
    body = await parse_body(request, ClockAdvanceRequest)
    now = await treasury(request).sandbox.advance(body.seconds)
    return json_response(ClockRecord(now=now))


class _Empty(BaseModel):
    """No fields: the body must be empty or ``{}``."""

    model_config = SandboxCompleteRequest.model_config


async def read_clock(request: web.Request) -> web.StreamResponse:
    """The business time: what expiries, settlement delays and evidence windows are decided by."""
    now = await treasury(request).sandbox.now()
    return json_response(ClockRecord(now=now))


def _settle(noun: str, action: str, param: str, body_model: type[BaseModel], doc: str) -> Handler:
    """A handler settling one movement: ``treasury.{noun}s.{action}(id, …)`` with a ticket.

    The six settle routes differ only in the service, the action, the path parameter and the
    body; what the body adds (a received ``amount``, a failure reason) comes from :func:`_extra`.
    """

    async def handler(request: web.Request) -> web.StreamResponse:
        settle = getattr(getattr(treasury(request), f"{noun}s"), action)
        record_id = request.match_info[param]
        return await act(
            request,
            body_model,
            record_of,
            lambda company, body, ticket: settle(
                company, record_id, idempotency=ticket, **_extra(body)
            ),
        )

    handler.__name__ = handler.__qualname__ = f"{action}_{noun}"
    handler.__doc__ = doc
    return handler


def _extra(body: BaseModel) -> dict[str, Any]:
    if isinstance(body, SandboxCompleteRequest):
        return {"amount": body.amount}
    if isinstance(body, SandboxFailRequest):
        return _reason(body)
    return {}


complete_deposit = _settle(
    "deposit",
    "complete",
    "deposit_id",
    SandboxCompleteRequest,
    "The funds arrived (``amount``: what arrived, if not what was announced).",
)
fail_deposit = _settle(
    "deposit", "fail", "deposit_id", SandboxFailRequest, "The funds never arrived."
)
complete_withdrawal = _settle(
    "withdrawal", "complete", "withdraw_id", _Empty, "The bank paid the withdrawal out."
)
fail_withdrawal = _settle(
    "withdrawal",
    "fail",
    "withdraw_id",
    SandboxFailRequest,
    "The bank rejected the payout; amount and fee go back to the wallet.",
)
complete_transfer = _settle(
    "transfer", "complete", "transfer_id", _Empty, "The currency conversion settled."
)
fail_transfer = _settle(
    "transfer",
    "fail",
    "transfer_id",
    SandboxFailRequest,
    "The conversion failed; the funds go back to the source wallet.",
)


async def virtual_account_incoming(request: web.Request) -> web.StreamResponse:
    """Funds arrive at a virtual account: a completed deposit credits its wallet."""
    incoming = treasury(request).virtual_accounts.incoming
    account_id = request.match_info["virtual_account_id"]
    return await act(
        request,
        SandboxIncomingRequest,
        record_of,
        lambda company, body, ticket: incoming(
            company, account_id, body.amount, body.reference, idempotency=ticket
        ),
    )


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
        "GET",
        "/api/v1/sandbox/clock",
        read_clock,
        "Read the sandbox clock",
        response=ClockRecord,
        tags=_SANDBOX,
    ),
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
