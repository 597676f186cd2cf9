"""Testing kit: fakes of the ports and checks of the ledger invariants, for this project and users.

Importable without Hypothesis:

- :class:`MemoryStorage`: the in-memory storage adapter (the reference implementation);
- :class:`FakeClock` and :class:`SequentialIds`: time and ids under test control;
- :func:`check_invariants`: the ledger invariants of ``ledger-invariants.md``, run against any
  storage; raises :class:`InvariantViolation` listing every breach.

With Hypothesis installed (the ``dev`` extra), :mod:`treasury_core.testing.strategies` has
strategies for currencies, amounts, accounts and operation sequences, and
:mod:`treasury_core.testing.machine` the stateful ``LedgerMachine`` to subclass for your own
storage, and :mod:`treasury_core.testing.payments_machine` the stateful ``PaymentsMachine``
(exported here as :class:`PaymentsMachine`, imported on first use so that this package stays
importable without Hypothesis).
"""

from typing import TYPE_CHECKING

from treasury_core.testing.clock import FakeClock, SequentialIds
from treasury_core.testing.invariants import InvariantViolation, check_invariants
from treasury_core.testing.memory import MemoryStorage

if TYPE_CHECKING:
    from treasury_core.testing.payments_machine import PaymentsMachine

__all__ = [
    "FakeClock",
    "InvariantViolation",
    "MemoryStorage",
    "PaymentsMachine",
    "SequentialIds",
    "check_invariants",
]


def __getattr__(name: str) -> object:
    """``PaymentsMachine`` needs Hypothesis: import it only when asked for."""
    if name == "PaymentsMachine":
        from treasury_core.testing.payments_machine import PaymentsMachine

        return PaymentsMachine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
