"""The shop's property tests of its storage adapter, with treasury-core's testing kit.

Run them with ``pytest examples/property_testing``. Against ``ShopStorage`` the state machine
fails (that is the bug the guide finds); against ``FixedShopStorage`` everything passes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from shop_storage import FixedShopStorage, ShopStorage

from treasury_core.ledger import AccountKind, PendingCategory, Reserve
from treasury_core.testing import MemoryStorage, check_invariants
from treasury_core.testing.machines.ledger import LedgerMachine
from treasury_core.testing.strategies import LedgerProgram, amounts, ledger_programs, run_program

#: How long the shop's card holds last, and how often its scheduler runs the expiry job.
HOLD_TIME = timedelta(minutes=15)
SWEEP_EVERY = timedelta(minutes=15)

# ``derandomize`` and no example database make every run, and so the guide's output, the same;
# skipping the explain phase (its "# or any other generated value" notes) keeps the run short.
# In your own suite keep Hypothesis's defaults: random runs explore more over time, and the
# database replays a failure until it is fixed.
REPRODUCIBLE = settings(
    max_examples=50,
    stateful_step_count=10,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)


@REPRODUCIBLE
@given(ledger_programs())
def test_programs_keep_the_ledger_invariants(program: LedgerProgram) -> None:
    """Any sequence of journals leaves a consistent ledger (the ledger invariants)."""
    storage = ShopStorage()
    run_program(storage, program)
    check_invariants(storage)


class ShopLedgerMachine(LedgerMachine):
    """The kit's ledger machine on the shop's storage, plus the shop's own traffic."""

    storage_class: ClassVar[type[MemoryStorage]] = ShopStorage

    def make_storage(self) -> MemoryStorage:
        """A fresh, empty shop storage for each run."""
        return self.storage_class()

    def _wallets_with_room(self) -> list[str]:
        return [w for w in self.model.wallets() if (self.model.room(w) or 0) > 0]

    @precondition(lambda self: self._wallets_with_room())
    @rule(data=st.data())
    def checkout(self, data: st.DataObject) -> None:
        """A card checkout: a hold on a customer's wallet that lapses after ``HOLD_TIME``."""
        wallet = data.draw(st.sampled_from(self._wallets_with_room()))
        code = self.model.currency[wallet]
        room = self.model.room(wallet)
        assert room is not None
        hold = Reserve(
            debit=wallet,
            credit=self.system_account(AccountKind.WORLD, code),
            currency=code,
            amount=data.draw(amounts(room)),
            category=PendingCategory.HOLD,
            deadline=self.clock.now() + HOLD_TIME,
        )
        self.apply_journal([hold])

    @rule()
    def scheduler_tick(self) -> None:
        """The shop's scheduler: time passes, then the expiry job runs, as in production."""
        self.clock.advance(SWEEP_EVERY.total_seconds())
        self.run_expiry_job(batch=100)


class FixedShopLedgerMachine(ShopLedgerMachine):
    """The same machine on the fixed storage."""

    storage_class = FixedShopStorage


TestShopLedger = ShopLedgerMachine.TestCase
TestShopLedger.settings = REPRODUCIBLE
TestFixedShopLedger = FixedShopLedgerMachine.TestCase
TestFixedShopLedger.settings = REPRODUCIBLE
