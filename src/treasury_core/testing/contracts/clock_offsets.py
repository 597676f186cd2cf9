"""The storage contract's tests of the sandbox clock's offset: the
:class:`~treasury_core.ports.ClockOffsets` that ``Storage.clock_offsets()`` supplies."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from treasury_core.ports import ClockOffsets, Storage
from treasury_core.testing.contracts.fixtures import Boom


def _offsets(storage: Storage) -> ClockOffsets:
    offsets = storage.clock_offsets()
    assert offsets is not None, "this storage keeps no clock offset (clock_offsets() is None)"
    return offsets


class ClockOffsetsContract:
    """The clock offset part of :class:`~treasury_core.testing.contracts.storage.StorageContract`.

    Mixed into the contract; each test takes the suite's ``storage`` fixture.
    """

    def test_the_clock_offset_only_grows_and_a_refused_advance_is_not_kept(
        self, storage: Storage
    ) -> None:
        """The stored offset: zero at first, advanced to the microsecond, never by a negative
        amount, not kept when the advance's check raises, read by a later call."""
        offsets = _offsets(storage)

        async def scenario() -> None:
            assert await offsets.get() == timedelta(0)
            step = timedelta(days=3, microseconds=7)
            assert await offsets.advance(step) == step
            assert await offsets.advance(step) == 2 * step
            assert await offsets.advance(timedelta(0)) == 2 * step
            seen: list[timedelta] = []

            def refuse(offset: timedelta) -> None:
                seen.append(offset)
                raise Boom

            with pytest.raises(Boom):
                await offsets.advance(timedelta(hours=1), refuse)
            assert seen == [2 * step + timedelta(hours=1)]
            with pytest.raises(ValueError):  # noqa: PT011 - the port fixes the type, not the words
                await offsets.advance(timedelta(seconds=-1))
            assert await offsets.get() == 2 * step

        asyncio.run(scenario())
        assert _offsets(storage).load() == timedelta(days=6, microseconds=14)

    def test_concurrent_clock_advances_add_up(self, storage: Storage) -> None:
        """Concurrent advances (as from several processes) lose none of each other."""
        offsets = _offsets(storage)

        async def worker() -> None:
            for _ in range(10):
                await offsets.advance(timedelta(seconds=1))

        async def scenario() -> None:
            await asyncio.gather(*(worker() for _ in range(4)))

        asyncio.run(scenario())
        assert offsets.load() == timedelta(seconds=40)
