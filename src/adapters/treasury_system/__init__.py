"""System adapters: the wall clock and ULID-based ids."""

from treasury_system.clock import SystemClock
from treasury_system.ids import UlidIds

__all__ = ["SystemClock", "UlidIds"]
