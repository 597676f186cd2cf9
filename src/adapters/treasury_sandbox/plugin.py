"""Registers the sandbox clock under ``sandbox``."""

from __future__ import annotations

from collections.abc import Mapping

from treasury_core.config import TreasuryConfig
from treasury_core.plugins.hookspecs import ClockFactory, hookimpl
from treasury_core.ports import Clock


def _sandbox_clock(config: TreasuryConfig) -> Clock:
    from treasury_sandbox.clock import SandboxClock

    return SandboxClock()


@hookimpl
def register_clock() -> Mapping[str, ClockFactory]:
    """The sandbox clock."""
    return {"sandbox": _sandbox_clock}
