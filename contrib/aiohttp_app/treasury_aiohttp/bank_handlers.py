"""``POST /api/v1/bank-statements``: a bank statement pushed over HTTP (the files rail).

The same import as ``treasury bank import``, limited to the calling company's records: a line
can settle only that company's deposits and withdrawals and credit only its virtual accounts,
and lines are remembered per company, so one company's statement never touches another's
money or blocks its lines.
"""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp.io import json_response, treasury
from treasury_aiohttp.routing import Route
from treasury_core.errors import ValidationFailed
from treasury_core.treasury.bank_files import ImportResult

#: What the body may be sent as. camt.053 is XML; MT940 is text but no bank pushes it over
#: HTTP, so the route takes XML only (the command line reads both).
XML_TYPES = ("application/xml", "text/xml")
#: What the XML body may hold: an MT940 file sent as XML is refused, not read as MT940.
CAMT_FORMATS = ("camt.053", "camt.054")


async def import_statement(request: web.Request) -> web.StreamResponse:
    """Import a camt.053 statement: each new booked line settles the company's deposit or
    withdrawal it matches, or credits its virtual account, in one transaction; lines already
    imported (by the bank's entry reference) are skipped; a malformed statement is refused
    whole (400 ``statement_invalid``, naming the entry and the reason) and nothing is applied.
    """
    if request.content_type not in XML_TYPES:
        raise web.HTTPUnsupportedMediaType()
    data = await request.read()
    if not data.strip():
        raise ValidationFailed(
            "The request body must be a camt.053 statement",
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
        response=ImportResult,
        tags=("Bank files",),
        raw_body=XML_TYPES,
        raw_body_description="A camt.053 (ISO 20022 bank-to-customer statement) document.",
        body_limit=lambda config: config.bank_statement_max_bytes,
    ),
)
