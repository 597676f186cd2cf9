"""The idempotency service's guarantees against double execution, on every backend."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from treasury_core import TreasuryConfig, bootstrap
from treasury_core.idempotency import IdempotencyState, StoredResponse
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.services.idempotency import Claim, Replay, complete_in
from treasury_core.testing.clock import FakeClock


def test_releasing_after_completion_keeps_the_stored_response(storage: Storage) -> None:
    """A cancelled handler releases its claim after the business commit: the result survives."""
    clock = FakeClock()
    service = bootstrap(
        TreasuryConfig(database_url="memory://"), storage=storage, clock=clock, wall_clock=clock
    ).idempotency

    async def scenario() -> object:
        claim = await service.claim(1, "k", "f" * 64)
        assert isinstance(claim, Claim)
        ticket = claim.ticket(lambda result: StoredResponse(200, result))
        await storage.run(lambda uow: complete_in(uow, ticket, ticket.render(b'{"id":1}')))
        await service.release(claim)
        return await service.claim(1, "k", "f" * 64)

    again = asyncio.run(scenario())
    assert again == Replay(StoredResponse(200, b'{"id":1}'))


def test_completion_rotates_the_token_so_a_stale_takeover_cannot_overwrite(
    storage: Storage,
) -> None:
    """A takeover that read the in-flight row before the completion commit must not win."""
    clock = FakeClock()
    service = bootstrap(
        TreasuryConfig(database_url="memory://"), storage=storage, clock=clock, wall_clock=clock
    ).idempotency

    async def scenario() -> tuple[bool, object]:
        claim = await service.claim(1, "k", "f" * 64)
        assert isinstance(claim, Claim)
        stale = await storage.run(lambda uow: uow.idempotency.get(1, "k"), write=False)
        assert stale is not None
        ticket = claim.ticket(lambda result: StoredResponse(200, result))
        await storage.run(lambda uow: complete_in(uow, ticket, ticket.render(b"{}")))
        clock.advance(3600)  # the original lease has long run out

        def takeover(uow: UnitOfWork) -> bool:
            # What a takeover does with the row it read before the completion committed.
            fresh = replace(stale, token="intruder", state=IdempotencyState.IN_FLIGHT)
            return uow.idempotency.replace(fresh, stale.token)

        took = await storage.run(takeover)
        return took, await service.claim(1, "k", "f" * 64)

    took, again = asyncio.run(scenario())
    assert took is False
    assert again == Replay(StoredResponse(200, b"{}"))
