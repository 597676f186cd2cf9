"""Operator keys in the company service: issued once, named uniquely among live keys, revoked
by id or name with immediate effect here, and never interchangeable with a merchant's key."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime

import pytest

from treasury_core.errors import AuthenticationFailed, NotFound, ValidationFailed
from treasury_core.operators import is_operator_key
from treasury_core.services import CompanyService
from treasury_core.testing import FakeClock, MemoryStorage, SequentialIds


def _service(storage: MemoryStorage, seconds: float = 0) -> CompanyService:
    return CompanyService(
        storage=storage, clock=FakeClock(), ids=SequentialIds(), key_cache_seconds=seconds
    )


def test_a_key_is_shown_once_and_only_its_digest_is_stored() -> None:
    async def scenario() -> None:
        storage = MemoryStorage()
        service = _service(storage)
        key, raw = await service.create_operator_key("  ops  ")
        assert raw.startswith("ok_") and is_operator_key(raw)
        assert (key.name, key.prefix, key.revoked_at) == ("ops", raw[:7], None)
        assert key.key_hash == hashlib.sha256(raw.encode()).hexdigest()
        [stored] = await service.operator_keys()
        assert stored == key
        assert raw not in stored.model_dump_json()
        principal = await service.authenticate_operator(raw)
        assert (principal.key_id, principal.name) == (key.id, "ops")
        # Two keys never share a secret.
        _, other = await service.create_operator_key("backup")
        assert other != raw

    asyncio.run(scenario())


def test_merchant_and_operator_keys_do_not_stand_in_for_each_other() -> None:
    async def scenario() -> None:
        service = _service(MemoryStorage())
        created = await service.create_company("Acme")
        _, raw = await service.create_operator_key("ops")
        for merchant_key in (created.secret_key, created.publishable_key):
            with pytest.raises(AuthenticationFailed, match="Invalid API key provided"):
                await service.authenticate_operator(merchant_key)
        with pytest.raises(AuthenticationFailed, match="Invalid API key provided"):
            await service.authenticate(raw)
        # Unknown, malformed and altered operator keys.
        for bad in ("ok_short", "ok_" + "x" * 30, raw + "x", raw[:-1], "ok_" + "é" * 20, ""):
            with pytest.raises(AuthenticationFailed):
                await service.authenticate_operator(bad)

    asyncio.run(scenario())


def test_a_live_name_is_unique_and_a_revoked_one_free_again() -> None:
    async def scenario() -> None:
        service = _service(MemoryStorage())
        first, _ = await service.create_operator_key("ops")
        with pytest.raises(ValidationFailed, match="named 'ops' already exists") as refused:
            await service.create_operator_key("ops")
        assert refused.value.code == "operator_key_name_taken"
        assert [k.id for k in await service.operator_keys()] == [first.id]
        await service.revoke_operator_key("ops")
        second, raw = await service.create_operator_key("ops")
        assert [(k.id, k.revoked_at is None) for k in await service.operator_keys()] == [
            (first.id, False),
            (second.id, True),
        ]
        assert (await service.authenticate_operator(raw)).key_id == second.id

    asyncio.run(scenario())


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "x" * 256, "ops\u202e", "opk_1"])
def test_a_bad_name_is_refused_and_nothing_is_stored(name: str) -> None:
    async def scenario() -> None:
        service = _service(MemoryStorage())
        with pytest.raises(ValidationFailed) as refused:
            await service.create_operator_key(name)
        assert refused.value.param == "name"
        assert await service.operator_keys() == []

    asyncio.run(scenario())


def test_revoking_by_id_or_name_ends_a_cached_key_at_once() -> None:
    async def scenario() -> None:
        service = _service(MemoryStorage(), 3600)
        by_id, raw_id = await service.create_operator_key("ops")
        by_name, raw_name = await service.create_operator_key("backup")
        await service.authenticate_operator(raw_id)  # both now cached
        await service.authenticate_operator(raw_name)
        revoked = await service.revoke_operator_key(by_id.id)
        assert revoked.id == by_id.id and revoked.revoked_at is not None
        with pytest.raises(AuthenticationFailed):
            await service.authenticate_operator(raw_id)
        assert (await service.authenticate_operator(raw_name)).key_id == by_name.id
        assert (await service.revoke_operator_key("backup")).id == by_name.id
        with pytest.raises(AuthenticationFailed):
            await service.authenticate_operator(raw_name)
        listed = await service.operator_keys()
        assert [k.revoked_at == revoked.revoked_at for k in listed] == [True, True]

    asyncio.run(scenario())


def test_revoking_what_is_not_a_live_key_is_not_found_and_changes_nothing() -> None:
    async def scenario() -> None:
        service = _service(MemoryStorage())
        key, raw = await service.create_operator_key("ops")
        await service.create_operator_key("backup")
        await service.revoke_operator_key("backup")
        for missing in ("nobody", "opk_nope", "backup"):
            with pytest.raises(NotFound, match=f"No such operator key: {missing}"):
                await service.revoke_operator_key(missing)
        assert (await service.authenticate_operator(raw)).key_id == key.id

    asyncio.run(scenario())


def test_a_cached_operator_key_survives_a_revocation_elsewhere_until_it_expires() -> None:
    async def scenario() -> None:
        storage = MemoryStorage()
        here = _service(storage, 3600)
        key, raw = await here.create_operator_key("ops")
        principal = await here.authenticate_operator(raw)
        # Another process revokes it directly in the shared database.
        at = datetime(2026, 1, 1, tzinfo=UTC)
        storage.run_sync(lambda uow: uow.operator_keys.revoke(key.id, at))
        assert await here.authenticate_operator(raw) == principal  # cached
        with pytest.raises(AuthenticationFailed):
            await _service(storage, 0).authenticate_operator(raw)

    asyncio.run(scenario())
