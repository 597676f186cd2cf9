"""Registers the wall clock (``system``) and ULID ids (``ulid``)."""

from __future__ import annotations

from collections.abc import Mapping

from treasury_core.config import TreasuryConfig
from treasury_core.plugins.hookspecs import ClockFactory, IdSourceFactory, hookimpl
from treasury_core.ports import Clock, IdSource


def _system_clock(config: TreasuryConfig) -> Clock:
    from treasury_system.clock import SystemClock

    return SystemClock()


def _ulid(config: TreasuryConfig) -> IdSource:
    from treasury_system.ids import UlidIds

    return UlidIds()


@hookimpl
def register_clock() -> Mapping[str, ClockFactory]:
    """The wall clock."""
    return {"system": _system_clock}


@hookimpl
def register_id_source() -> Mapping[str, IdSourceFactory]:
    """ULID ids."""
    return {"ulid": _ulid}
