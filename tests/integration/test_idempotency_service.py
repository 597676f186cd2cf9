"""The idempotency service's guarantees against double execution, on every backend."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from treasury_core import TreasuryConfig, bootstrap
from treasury_core.companies import KeyKind
from treasury_core.errors import IdempotencyError
from treasury_core.idempotency import MAX_KEY_LENGTH, IdempotencyState, StoredResult, scoped_key
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.services.idempotency import Claim, Replay, bind, complete_in
from treasury_core.testing.fakes.clock import FakeClock


def test_releasing_after_completion_keeps_the_stored_response(storage: Storage) -> None:
    """A cancelled handler releases its claim after the business commit: the result survives."""
    clock = FakeClock()
    service = bootstrap(
        TreasuryConfig(database_url="memory://"), storage=storage, clock=clock, wall_clock=clock
    ).idempotency

    async def scenario() -> object:
        claim = await service.claim(1, "k", "f" * 64, kind=KeyKind.SECRET)
        assert isinstance(claim, Claim)
        ticket = claim.ticket(lambda result: StoredResult(200, result))
        await storage.run(lambda uow: complete_in(uow, ticket, ticket.recorder(b'{"id":1}')))
        await service.release(claim)
        return await service.claim(1, "k", "f" * 64, kind=KeyKind.SECRET)

    again = asyncio.run(scenario())
    assert again == Replay(StoredResult(200, b'{"id":1}'))


def test_completion_rotates_the_token_so_a_stale_takeover_cannot_overwrite(
    storage: Storage,
) -> None:
    """A takeover that read the in-flight row before the completion commit must not win."""
    clock = FakeClock()
    service = bootstrap(
        TreasuryConfig(database_url="memory://"), storage=storage, clock=clock, wall_clock=clock
    ).idempotency

    async def scenario() -> tuple[bool, object]:
        claim = await service.claim(1, "k", "f" * 64, kind=KeyKind.SECRET)
        assert isinstance(claim, Claim)
        stale = await storage.run(lambda uow: uow.idempotency.get(1, "k"), write=False)
        assert stale is not None
        ticket = claim.ticket(lambda result: StoredResult(200, result))
        await storage.run(lambda uow: complete_in(uow, ticket, ticket.recorder(b"{}")))
        clock.advance(3600)  # the original lease has long run out

        def takeover(uow: UnitOfWork) -> bool:
            # What a takeover does with the row it read before the completion committed.
            fresh = replace(stale, token="intruder", state=IdempotencyState.IN_FLIGHT)
            return uow.idempotency.replace(fresh, stale.token)

        took = await storage.run(takeover)
        return took, await service.claim(1, "k", "f" * 64, kind=KeyKind.SECRET)

    took, again = asyncio.run(scenario())
    assert took is False
    assert again == Replay(StoredResult(200, b"{}"))


def test_each_key_kind_has_its_own_records(storage: Storage) -> None:
    """Issue 20: a publishable key never gets a secret key's stored answer, nor the reverse; a
    secret key's record is stored under the key as presented (records from before the split
    replay as they did), and the longest presentable key fits in either space."""
    clock = FakeClock()
    service = bootstrap(
        TreasuryConfig(database_url="memory://"), storage=storage, clock=clock, wall_clock=clock
    ).idempotency

    async def answer(key: str, kind: KeyKind, body: bytes) -> Claim | Replay:
        claim = await service.claim(1, key, "f" * 64, kind=kind)
        if isinstance(claim, Claim):
            await service.complete(claim, StoredResult(200, body))
        return claim

    async def scenario() -> None:
        for key in ("k", "x" * MAX_KEY_LENGTH):
            assert isinstance(await answer(key, KeyKind.SECRET, b"secret"), Claim)
            assert isinstance(await answer(key, KeyKind.PUBLISHABLE, b"publishable"), Claim)
            for kind, body in ((KeyKind.SECRET, b"secret"), (KeyKind.PUBLISHABLE, b"publishable")):
                assert await service.claim(1, key, "f" * 64, kind=kind) == Replay(
                    StoredResult(200, body)
                )
            # The default kind is the secret key's, stored as presented.
            assert await service.claim(1, key, "f" * 64, kind=KeyKind.SECRET) == Replay(
                StoredResult(200, b"secret")
            )
            stored = await storage.run(
                lambda uow, key=key: uow.idempotency.get(1, key), write=False
            )
            assert stored is not None and stored.result == StoredResult(200, b"secret")

    asyncio.run(scenario())


def test_no_presented_key_names_a_publishable_record() -> None:
    """The publishable space starts with a character a presented key cannot hold."""
    scoped = scoped_key("k", KeyKind.PUBLISHABLE)
    assert not scoped.isprintable()
    assert len(scoped_key("x" * MAX_KEY_LENGTH, KeyKind.PUBLISHABLE)) <= MAX_KEY_LENGTH
    assert scoped_key("k", KeyKind.SECRET) == "k"


def test_a_key_bound_to_a_record_is_given_back_with_it(storage: Storage) -> None:
    """A request that bound its key to the record it wrote and then failed without an answer
    leaves the key free at once (no lease to wait out), bound still; a retry with another body
    is refused as any reuse is."""
    clock = FakeClock()
    service = bootstrap(
        TreasuryConfig(database_url="memory://"), storage=storage, clock=clock, wall_clock=clock
    ).idempotency

    async def scenario() -> object:
        first = await service.claim(1, "bound", "f" * 64, kind=KeyKind.SECRET)
        assert isinstance(first, Claim) and first.resource is None
        ticket = first.ticket(lambda result: StoredResult(200, result))
        await storage.run(lambda uow: bind(uow, ticket, "pi:7"))
        await service.release(first)  # the 502 of a provider call whose answer was lost
        with pytest.raises(IdempotencyError):
            await service.claim(1, "bound", "0" * 64, kind=KeyKind.SECRET)
        return await service.claim(1, "bound", "f" * 64, kind=KeyKind.SECRET)

    resumed = asyncio.run(scenario())
    assert isinstance(resumed, Claim) and resumed.resource == "pi:7"


def test_a_bound_key_resumes_and_an_unbound_one_starts_afresh(storage: Storage) -> None:
    """The retry of a bound key gets its record; the retry of a released unbound key gets a
    plain claim; unbinding (the record ended) makes the next release delete the key."""
    clock = FakeClock()
    service = bootstrap(
        TreasuryConfig(database_url="memory://"), storage=storage, clock=clock, wall_clock=clock
    ).idempotency

    async def scenario() -> list[object]:
        seen: list[object] = []
        first = await service.claim(1, "k", "f" * 64, kind=KeyKind.SECRET)
        assert isinstance(first, Claim)
        ticket = first.ticket(lambda result: StoredResult(200, result))
        await storage.run(lambda uow: bind(uow, ticket, "re_1"))
        await service.release(first)
        second = await service.claim(1, "k", "f" * 64, kind=KeyKind.SECRET)
        assert isinstance(second, Claim)
        seen.append(second.resource)
        again = second.ticket(lambda result: StoredResult(200, result))
        await storage.run(lambda uow: bind(uow, again, None))
        await service.release(second)
        third = await service.claim(1, "k", "f" * 64, kind=KeyKind.SECRET)
        assert isinstance(third, Claim)
        seen.append(third.resource)
        return seen

    assert asyncio.run(scenario()) == ["re_1", None]
