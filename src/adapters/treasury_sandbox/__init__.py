"""Sandbox adapters: a clock that can be advanced (card provider, bank rail and FX come later)."""

from treasury_sandbox.clock import SandboxClock

__all__ = ["SandboxClock"]
