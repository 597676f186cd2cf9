"""The dashboard's operator page: the bank reconciliation (breaks and unmatched lines) and the
card provider's (differences, refunds awaiting the provider's answer).

All are facts about the platform's accounts, which hold every company's money: the page is
wrapped by :func:`~treasury_aiohttp.dashboard.auth.operator_page`, so only an operator session
opens it, and no company page reads them. It shows what ``treasury bank breaks --all`` and
``treasury bank unmatched`` list, and the card differences of
:class:`~treasury_core.services.payments.card_reconciliation.CardReconciliation`, through the same
services.
"""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp.dashboard import pages
from treasury_aiohttp.dashboard.auth import OperatorSession, render
from treasury_aiohttp.io import treasury
from treasury_core.movements.safeguarding import BreakStatus
from treasury_core.payments.card_differences import CardDifferenceStatus

#: The most rows of each table the page shows (oldest first, as the commands list them).
ROWS = 500


def signed_money(request: web.Request, amount: int, currency: str) -> str:
    """A difference: ``+€5.00`` or ``-€5.00``, so its direction reads at a glance."""
    return ("+" if amount > 0 else "") + pages.money(request, amount, currency)


async def bank(request: web.Request, session: OperatorSession) -> web.StreamResponse:
    """``GET /dashboard/bank``: open breaks, resolved breaks, unmatched statement lines; open
    and resolved card differences, refunds awaiting the card provider's answer."""
    pages.only(request, ())
    t = treasury(request)
    open_breaks = await t.safeguarding.breaks(BreakStatus.OPEN, limit=ROWS)
    resolved = await t.safeguarding.breaks(BreakStatus.RESOLVED, limit=ROWS)
    unmatched = await t.bank.unmatched(limit=ROWS)
    cards = t.card_reconciliation
    open_cards = await cards.differences(CardDifferenceStatus.OPEN, limit=ROWS)
    resolved_cards = await cards.differences(CardDifferenceStatus.RESOLVED, limit=ROWS)
    awaiting = await cards.refunds_awaiting_answer(limit=ROWS)
    return render(
        request, "bank.html", session.prefix, session=session, title="Bank reconciliation",
        open_breaks=open_breaks, resolved=resolved, unmatched=unmatched, rows=ROWS,
        open_cards=open_cards, resolved_cards=resolved_cards, awaiting=awaiting,
        money=pages.money, signed_money=signed_money, req=request,
    )  # fmt: skip


__all__ = ["bank"]
