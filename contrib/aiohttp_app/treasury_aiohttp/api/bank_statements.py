"""``POST /api/v1/bank-statements``: a bank statement pushed over HTTP (the files rail).

A statement says what money reached and left the treasury's bank accounts: a fact from outside
the system, which only the bank asserts, through the operator. So the route takes the
operator's key only (a company's key is 403, whatever it would have credited) and runs the same
import as ``treasury bank import``, across companies.
"""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp.io import json_response, treasury
from treasury_aiohttp.routing import Auth, Route
from treasury_aiohttp.settings import app_settings
from treasury_core.errors import ValidationFailed
from treasury_core.movements.bank_files import ImportResult

#: What the body may be sent as. camt.053 is XML; MT940 is text but no bank pushes it over
#: HTTP, so the route takes XML only (the command line reads both).
XML_TYPES = ("application/xml", "text/xml")
#: What the XML body may hold: an MT940 file sent as XML is refused, not read as MT940.
CAMT_FORMATS = ("camt.053", "camt.054")


async def import_statement(request: web.Request) -> web.StreamResponse:
    """Import a camt.053 or camt.054 file as the operator: each new booked line settles the
    deposit or withdrawal it matches, or credits the virtual account it names, in one
    transaction; lines already imported (by their identity on the account, whoever imported
    them) are skipped; a malformed file, or one of an account that is not the treasury's, is
    refused whole (400 ``statement_invalid``, naming the place and the reason) and nothing is
    applied.
    """
    if request.content_type not in XML_TYPES:
        raise web.HTTPUnsupportedMediaType()
    data = await request.read()
    # An XML document starts with "<" (after a byte-order mark and white space): anything else
    # is refused here, before a reader of another format spends time on it.
    if not data.removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"<"):
        raise ValidationFailed(
            "The request body must be a camt.053 or camt.054 XML document",
            param="statement",
            code="statement_invalid",
        )
    result = await treasury(request).bank.import_statement(data, formats=CAMT_FORMATS)
    return json_response(result)


ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/api/v1/bank-statements",
        import_statement,
        "Import a bank statement",
        auth=Auth.OPERATOR,
        response=ImportResult,
        tags=("Bank files",),
        raw_body=XML_TYPES,
        raw_body_description="A camt.053 (ISO 20022 bank-to-customer statement) document.",
        description="Only the operator's key (`ok_…`, from `treasury operator-keys create`) "
        "is accepted; a company's secret or publishable key is 403 `operator_key_required` "
        "and nothing changes. No `Idempotency-Key`: a line already imported is skipped.",
        body_limit=lambda config: app_settings(config).bank_statement_max_bytes,
    ),
)
