"""Acting on a chargeback (sandbox disputes): submit evidence, accept it.

Reading one is a record route (``record_handlers``), which answers the same record.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from treasury_aiohttp.api.shapes import act
from treasury_aiohttp.io import treasury
from treasury_aiohttp.routing import Route
from treasury_core.interface.records import ChargebackRecord
from treasury_core.payments.disputes import ChargebackEvidence
from treasury_core.services.payments.disputes import DisputeService


class NoFields(BaseModel):
    """No fields: the body must be empty or ``{}``."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def _disputes(request: web.Request) -> DisputeService:
    return treasury(request).disputes


async def submit_chargeback_evidence(request: web.Request) -> web.StreamResponse:
    """Submit (or amend) evidence against an open chargeback before ``evidence_due_by``."""
    disputes, chargeback_id = _disputes(request), request.match_info["chargeback_id"]
    return await act(
        request,
        ChargebackEvidence,
        ChargebackRecord.of,
        lambda company, body, ticket: disputes.submit_evidence(
            company, chargeback_id, body, idempotency=ticket
        ),
    )


async def accept_chargeback(request: web.Request) -> web.StreamResponse:
    """Accept an open chargeback: it is lost now (``chargeback.failed``)."""
    disputes, chargeback_id = _disputes(request), request.match_info["chargeback_id"]
    return await act(
        request,
        NoFields,
        ChargebackRecord.of,
        lambda company, _body, ticket: disputes.accept(company, chargeback_id, idempotency=ticket),
    )


_PAYMENTS = ("Payments",)
_CHARGEBACK = {"chargeback_id": "The chargeback's id (`cb_…`)."}

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/payments/chargeback/{chargeback_id}/evidence",
        submit_chargeback_evidence,
        "Submit evidence against a chargeback",
        body=ChargebackEvidence,
        response=ChargebackRecord,
        tags=_PAYMENTS,
        description="Text fields (Stripe's dispute evidence names, at most 5000 characters "
        'each); a later submission changes the fields it names, `""` clears one. Open '
        "chargebacks only, before `evidence_due_by` (400 `chargeback_evidence_window_closed` "
        "after, `chargeback_closed` once decided). The outcome is still the card network's, "
        "decided when the window closes.",
        path_params=_CHARGEBACK,
    ),
    Route(
        "POST",
        "/api/v1/payments/chargeback/{chargeback_id}/accept",
        accept_chargeback,
        "Accept a chargeback",
        body=NoFields,
        response=ChargebackRecord,
        tags=_PAYMENTS,
        description="The chargeback is lost at once (`accepted: true`, "
        "`merchant_of_record.chargeback.failed`). Open chargebacks only.",
        path_params=_CHARGEBACK,
    ),
)
