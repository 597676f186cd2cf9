"""The per-process API-key cache: a hit skips storage, a revocation here ends it at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from treasury_core.companies import KeyKind, hash_api_key
from treasury_core.errors import AuthenticationFailed, NotFound
from treasury_core.services import CompanyService
from treasury_core.testing import FakeClock, MemoryStorage, SequentialIds


def _service(storage: MemoryStorage, seconds: float) -> CompanyService:
    return CompanyService(
        storage=storage, clock=FakeClock(), ids=SequentialIds(), key_cache_seconds=seconds
    )


def test_a_cached_key_survives_a_revocation_elsewhere_until_it_expires() -> None:
    async def scenario() -> None:
        storage = MemoryStorage()
        here = _service(storage, 3600)
        created = await here.create_company("Acme")
        principal = await here.authenticate(created.secret_key)
        # Another process revokes the key directly in the shared database.
        revoked_at = datetime(2026, 1, 1, tzinfo=UTC)
        storage.run_sync(lambda uow: uow.companies.revoke_api_key(principal.key_id, revoked_at))
        assert await here.authenticate(created.secret_key) == principal  # cached
        # Without a cache, the same process sees the revocation at once.
        uncached = _service(storage, 0)
        with pytest.raises(AuthenticationFailed):
            await uncached.authenticate(created.secret_key)

    asyncio.run(scenario())


def test_revoking_through_the_service_ends_the_cached_key_at_once() -> None:
    async def scenario() -> None:
        service = _service(MemoryStorage(), 3600)
        created = await service.create_company("Acme")
        principal = await service.authenticate(created.secret_key)
        await service.authenticate(created.publishable_key)
        await service.revoke_api_key(principal.key_id)
        with pytest.raises(AuthenticationFailed):
            await service.authenticate(created.secret_key)
        # The other key of the company is untouched.
        assert (await service.authenticate(created.publishable_key)).company_id == (
            principal.company_id
        )

    asyncio.run(scenario())


class _GatedReads(MemoryStorage):
    """Reads wait at a gate after reading, so a test can slip a revocation in between."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: asyncio.Event | None = None
        self.at_gate = asyncio.Event()

    async def run(self, fn, *, write=True, snapshot=False):  # type: ignore[no-untyped-def]
        result = await super().run(fn, write=write, snapshot=snapshot)
        if not write and self.gate is not None:
            self.at_gate.set()
            await self.gate.wait()
        return result


def test_a_lookup_that_straddles_a_revocation_is_not_cached() -> None:
    async def scenario() -> None:
        storage = _GatedReads()
        service = CompanyService(
            storage=storage, clock=FakeClock(), ids=SequentialIds(), key_cache_seconds=3600
        )
        created = await service.create_company("Acme")
        digest = hash_api_key(created.secret_key)
        key = storage.run_sync(lambda uow: uow.companies.api_key_by_hash(digest), write=False)
        assert key is not None
        storage.gate = asyncio.Event()
        # A lookup reads the key while it is live and is held up before it finishes...
        in_flight = asyncio.create_task(service.authenticate(created.secret_key))
        await storage.at_gate.wait()
        # ...while a revocation commits.
        await service.revoke_api_key(key.id)
        storage.gate.set()
        assert (await in_flight).key_id == key.id  # it read a live key: this request passes
        storage.gate = None
        with pytest.raises(AuthenticationFailed):
            await service.authenticate(created.secret_key)

    asyncio.run(scenario())


def test_rotating_a_key_ends_the_old_ones_of_its_kind_here_at_once() -> None:
    async def scenario() -> None:
        service = _service(MemoryStorage(), 3600)
        created = await service.create_company("Acme")
        company_id = created.company.id
        old = await service.authenticate(created.secret_key)  # now cached
        rotated = await service.rotate_api_key(company_id, KeyKind.SECRET)
        assert rotated.revoked_key_ids == (old.key_id,)
        assert rotated.raw_key.startswith("sk_")
        with pytest.raises(AuthenticationFailed):
            await service.authenticate(created.secret_key)
        assert (await service.authenticate(rotated.raw_key)).company_id == company_id
        # The publishable key is another kind: untouched.
        await service.authenticate(created.publishable_key)
        # Keeping the old keys issues a second live key of the kind.
        kept = await service.rotate_api_key(company_id, KeyKind.SECRET, revoke_old=False)
        assert kept.revoked_key_ids == ()
        await service.authenticate(rotated.raw_key)
        keys = await service.api_keys(company_id)
        live = [k.id for k in keys if k.kind is KeyKind.SECRET and k.revoked_at is None]
        assert live == [rotated.key.id, kept.key.id]
        assert [c.name for c in await service.list_companies()] == ["Acme"]

    asyncio.run(scenario())


def test_rotating_for_a_company_that_does_not_exist_changes_nothing() -> None:
    async def scenario() -> None:
        storage = MemoryStorage()
        service = _service(storage, 0)
        created = await service.create_company("Acme")
        with pytest.raises(NotFound, match="No such company: 999"):
            await service.rotate_api_key(999, KeyKind.SECRET)
        assert await service.api_keys(999) == []
        assert len(await service.api_keys(created.company.id)) == 2

    asyncio.run(scenario())
