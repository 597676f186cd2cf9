"""Testing kit: fakes of the ports and checks of the ledger invariants, for this project and users.

Importable without Hypothesis:

- :class:`MemoryStorage`: the in-memory storage adapter (the reference implementation);
- :class:`FakeClock` and :class:`SequentialIds`: time and ids under test control;
- :class:`SalesOnlyCardProvider`: a card provider with every optional capability off;
- :class:`FlakyCardProvider`: a card provider with every capability on that keeps its charges
  and refunds and, on demand, loses answers after acting or refuses calls before acting;
- :func:`check_invariants`: the ledger invariants (docs/concepts/ledger.md), run against any
  storage; raises :class:`InvariantViolation` listing every breach.

With Hypothesis installed (the ``dev`` extra):

- :mod:`treasury_core.testing.strategies`: strategies for currencies, amounts, wallets (service
  requests and ledger accounts) and ledger operation sequences (``ledger_programs`` with
  ``run_program``);
- the stateful machines, each run against a storage you supply by subclassing and overriding
  ``make_storage()`` (or through its ``*_test_case(factory)`` helper), each open to rules and
  invariants of your own:

  - :class:`LedgerMachine` (:mod:`~treasury_core.testing.machines.ledger`): journals through the
  storage
    port, against a reference ledger;
  - :class:`TreasuryMachine` (:mod:`~treasury_core.testing.machines.treasury`): wallets, deposits,
    withdrawals, transfers and FX through the services;
  - :class:`PaymentsMachine` (:mod:`~treasury_core.testing.machines.payments`): payment intents
    with the sandbox card table.

With pytest installed:

- :class:`StorageContract` (:mod:`~treasury_core.testing.contracts.storage`): the storage contract
tests
  every built-in backend passes, run on your storage by subclassing it in a ``Test*`` class that
  provides a ``storage`` fixture;
- :class:`CardProviderContract` (:mod:`~treasury_core.testing.contracts.card_provider`): the card
  provider contract tests the sandbox and Stripe providers pass, run on your card provider by
  subclassing it in a ``Test*`` class that provides ``card_provider``, ``good_card`` and
  ``declined_card`` fixtures.

The machines, their ``*_test_case`` helpers and the contracts are exported here but imported on
first use, so that ``import treasury_core.testing`` works without Hypothesis or pytest. The
guide ``docs/guides/property-testing.md`` walks through finding a bug in a storage adapter with
them; ``docs/guides/writing-an-adapter.md`` shows the contract.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from treasury_core.ledger.invariants import InvariantViolation, check_invariants
from treasury_core.memory.storage import MemoryStorage
from treasury_core.testing.fakes.card_providers import FlakyCardProvider, SalesOnlyCardProvider
from treasury_core.testing.fakes.clock import FakeClock, SequentialIds

if TYPE_CHECKING:
    from treasury_core.testing.contracts.card_provider import CardProviderContract
    from treasury_core.testing.contracts.storage import StorageContract
    from treasury_core.testing.machines.ledger import LedgerMachine, ledger_machine_test_case
    from treasury_core.testing.machines.payments import (
        PaymentsMachine,
        payments_machine_test_case,
    )
    from treasury_core.testing.machines.treasury import (
        TreasuryMachine,
        treasury_machine_test_case,
    )

__all__ = [
    "CardProviderContract",
    "FakeClock",
    "FlakyCardProvider",
    "InvariantViolation",
    "LedgerMachine",
    "MemoryStorage",
    "PaymentsMachine",
    "SalesOnlyCardProvider",
    "SequentialIds",
    "StorageContract",
    "TreasuryMachine",
    "check_invariants",
    "ledger_machine_test_case",
    "payments_machine_test_case",
    "treasury_machine_test_case",
]

#: Names imported on first use (they need Hypothesis or pytest), and the module each comes from.
_LAZY = {
    "LedgerMachine": "treasury_core.testing.machines.ledger",
    "ledger_machine_test_case": "treasury_core.testing.machines.ledger",
    "PaymentsMachine": "treasury_core.testing.machines.payments",
    "payments_machine_test_case": "treasury_core.testing.machines.payments",
    "TreasuryMachine": "treasury_core.testing.machines.treasury",
    "treasury_machine_test_case": "treasury_core.testing.machines.treasury",
    "StorageContract": "treasury_core.testing.contracts.storage",
    "CardProviderContract": "treasury_core.testing.contracts.card_provider",
}


def __getattr__(name: str) -> object:
    """The machines need Hypothesis and the contracts pytest: import their module when asked."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    """The module's names, the lazily imported ones included."""
    return sorted({*globals(), *__all__})
