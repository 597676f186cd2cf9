"""The dashboard's operator page: the bank reconciliation (breaks and unmatched lines).

Both are facts about the treasury's bank accounts, which hold every company's money: the page
is wrapped by :func:`~treasury_aiohttp.dashboard_auth.operator_page`, so only an operator
session opens it, and no company page reads them. It shows what ``treasury bank breaks --all``
and ``treasury bank unmatched`` list, through the same services.
"""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp import dashboard_pages as pages
from treasury_aiohttp.dashboard_auth import OperatorSession, render
from treasury_aiohttp.io import treasury
from treasury_core.treasury.safeguarding import BreakStatus

#: The most rows of each table the page shows (oldest first, as the commands list them).
ROWS = 500


def signed_money(request: web.Request, amount: int, currency: str) -> str:
    """A difference: ``+€5.00`` or ``-€5.00``, so its direction reads at a glance."""
    return ("+" if amount > 0 else "") + pages.money(request, amount, currency)


async def bank(request: web.Request, session: OperatorSession) -> web.StreamResponse:
    """``GET /dashboard/bank``: open breaks, resolved breaks, unmatched statement lines."""
    pages.only(request, ())
    t = treasury(request)
    open_breaks = await t.safeguarding.breaks(BreakStatus.OPEN, limit=ROWS)
    resolved = await t.safeguarding.breaks(BreakStatus.RESOLVED, limit=ROWS)
    unmatched = await t.bank.unmatched(limit=ROWS)
    return render(
        request, "bank.html", session.prefix, session=session, title="Bank reconciliation",
        open_breaks=open_breaks, resolved=resolved, unmatched=unmatched, rows=ROWS,
        money=pages.money, signed_money=signed_money, req=request,
    )  # fmt: skip


__all__ = ["bank"]
