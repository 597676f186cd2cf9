"""The background loop marks its storage calls as background work, and nothing else does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from treasury_aiohttp.worker import work_loop
from treasury_core import TreasuryConfig, bootstrap
from treasury_core.ports import UnitOfWork, in_background
from treasury_core.ports.storage import Storage


class _Recording:
    """Wraps a storage's ``run``: records, per call, whether it was made as background work."""

    def __init__(self, storage: Storage) -> None:
        self.marks: list[bool] = []
        self._run = storage.run

    async def run(self, fn: Callable[[UnitOfWork], Any], **kwargs: Any) -> Any:
        self.marks.append(in_background())
        return await self._run(fn, **kwargs)


def test_the_work_loop_writes_as_background_work_and_requests_do_not() -> None:
    treasury = bootstrap(TreasuryConfig(database_url="memory://"))
    recording = _Recording(treasury.storage)
    treasury.storage.run = recording.run  # type: ignore[method-assign]

    async def scenario() -> None:
        await treasury.companies.create_company("Acme")  # a request's write
        assert recording.marks and not any(recording.marks)
        recording.marks.clear()
        stop = asyncio.Event()
        await work_loop(treasury, stop, after_pass=stop.set)  # one whole pass, purges included
        assert recording.marks and all(recording.marks)
        assert not in_background()  # the mark ended with the pass

    try:
        asyncio.run(scenario())
    finally:
        treasury.close()
