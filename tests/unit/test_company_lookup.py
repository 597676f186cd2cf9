"""``CompanyService.get_company``: the company a hosted page names, or NotFound."""

from __future__ import annotations

import asyncio

import pytest

from treasury_core.errors import NotFound
from treasury_core.services import CompanyService
from treasury_core.testing import FakeClock, MemoryStorage, SequentialIds


def test_a_company_is_found_by_id_and_an_unknown_id_is_not_found() -> None:
    async def scenario() -> None:
        service = CompanyService(storage=MemoryStorage(), clock=FakeClock(), ids=SequentialIds())
        acme = await service.create_company("Acme")
        globex = await service.create_company("Globex")
        assert (await service.get_company(acme.company.id)).name == "Acme"
        assert (await service.get_company(globex.company.id)).name == "Globex"
        with pytest.raises(NotFound) as missing:
            await service.get_company(globex.company.id + 1)
        assert missing.value.param == "company_id"

    asyncio.run(scenario())
