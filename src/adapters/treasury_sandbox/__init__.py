"""Sandbox adapters: an advanceable clock, a bank rail, FX rates and a card provider.

``SandboxBankRail`` is imported on first use: it needs schwifty (the ``server`` extra), while
the others need nothing beyond the standard library.
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
