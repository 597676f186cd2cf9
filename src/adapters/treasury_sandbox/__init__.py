"""Sandbox adapters: a clock that can be advanced and a bank rail (card provider and FX come later).

``SandboxBankRail`` is imported on first use: it needs schwifty (the ``server`` extra), while
the clock needs nothing beyond the standard library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treasury_sandbox.clock import SandboxClock

__all__ = ["SandboxBankRail", "SandboxClock"]

if TYPE_CHECKING:
    from treasury_sandbox.bank_rail import SandboxBankRail
else:

    def __getattr__(name: str) -> object:
        if name == "SandboxBankRail":
            from treasury_sandbox.bank_rail import SandboxBankRail

            return SandboxBankRail
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
