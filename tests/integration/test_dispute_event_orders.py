"""A dispute's provider events in every order they can arrive: the chargeback ends as the
dispute really ended, whatever came first, and nothing stays held for a dispute that is over.

A won dispute is announced as opened (``charge.dispute.created``, ``.funds_withdrawn``) and won
(``.funds_reinstated``, ``.closed`` with status won); a lost one as opened twice and lost. Each
permutation runs on its own captured intent, on every storage.
"""

from __future__ import annotations

import itertools

import pytest

from tests.lost_answers import AMOUNT, World, make_world, opened
from treasury_core.payments.records import Chargeback, ChargebackStatus
from treasury_core.ports import Storage
from treasury_core.ports.card_provider import CardProviderEvent, CardProviderEventKind

K = CardProviderEventKind
DISPUTED = 600

#: The events of one dispute, by how it ended: (Stripe's type, the port's kind).
WON = (
    ("charge.dispute.created", K.DISPUTE_OPENED),
    ("charge.dispute.funds_withdrawn", K.DISPUTE_OPENED),
    ("charge.dispute.funds_reinstated", K.DISPUTE_WON),
    ("charge.dispute.closed", K.DISPUTE_WON),
)
LOST = (
    ("charge.dispute.created", K.DISPUTE_OPENED),
    ("charge.dispute.funds_withdrawn", K.DISPUTE_OPENED),
    ("charge.dispute.closed", K.DISPUTE_LOST),
)


@pytest.fixture
async def world(storage: Storage) -> World:
    return await opened(make_world(storage))


async def _chargeback(world: World, dispute: str) -> Chargeback | None:
    """The chargeback of the provider's dispute (found by it, as the events find it)."""
    return await world.treasury.storage.run(
        lambda uow: uow.records.find(Chargeback, dispute), write=False
    )


@pytest.mark.parametrize(
    ("events", "ended", "disputed"),
    [(WON, ChargebackStatus.WON, 0), (LOST, ChargebackStatus.LOST, DISPUTED)],
    ids=["won", "lost"],
)
async def test_every_order_of_a_disputes_events_ends_as_the_dispute_did(
    world: World,
    events: tuple[tuple[str, CardProviderEventKind], ...],
    ended: ChargebackStatus,
    disputed: int,
) -> None:
    for number, order in enumerate(itertools.permutations(events)):
        intent = await world.paid_by_card()
        assert intent.provider_reference is not None
        for position, (type_, kind) in enumerate(order):
            event = CardProviderEvent(
                id=f"evt_{number}_{position}",
                type=type_,
                kind=kind,
                reference=intent.provider_reference,
                amount=DISPUTED,
                currency=intent.billing_currency,
                dispute=f"dp_{number}",
            )
            await world.treasury.provider_events.apply(event)
        chargeback = await _chargeback(world, f"dp_{number}")
        assert chargeback is not None
        assert chargeback.payment_intent_id == intent.id
        assert chargeback.status is ended, [t for t, _ in order]
        now = await world.get(intent)
        assert now.amount_disputed == disputed, [t for t, _ in order]
        assert now.amount_refundable == AMOUNT - disputed
    world.check()
