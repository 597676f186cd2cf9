"""Sandbox adapters: an advanceable clock, a bank rail, FX rates and a card provider.

``SandboxBankRail`` is imported on first use: it loads schwifty and its bank and country
registries, which a process that never touches bank details need not pay for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treasury_sandbox.card_provider import SandboxCardProvider
from treasury_sandbox.clock import SandboxClock
from treasury_sandbox.fx import SandboxFxRates

__all__ = ["SandboxBankRail", "SandboxCardProvider", "SandboxClock", "SandboxFxRates"]

if TYPE_CHECKING:
    from treasury_sandbox.bank_rail import SandboxBankRail
else:

    def __getattr__(name: str) -> object:
        if name == "SandboxBankRail":
            from treasury_sandbox.bank_rail import SandboxBankRail

            return SandboxBankRail
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
