"""A Hypothesis state machine that holds a storage backend's ledger to a plain reference model.

:class:`LedgerMachine` opens accounts in 2-3 currencies (an unguarded world, FX-liquidity and fees
account per currency, and guarded wallets, some with an overdraft limit), then runs a random
sequence of journals through the storage port: moves, reservations (hold or out, with or without
deadline), full and partial posts, voids, clock advances with the expiry job, multi-leg and FX
journals, and operations built to be refused (overdrafts, posting an expired or resolved pending
movement, over-posting, expiring early, resolving twice in one journal).

The same operations feed :class:`ReferenceLedger`, dicts of ints that know nothing of the kernel.
The model decides whether each journal must be accepted or refused (and with which error); the
storage must agree. After every step the machine checks:

- the storage's ledger equals the model's, account by account and movement by movement
  (invariant 13);
- :func:`~treasury_core.testing.invariants.check_snapshot` (what
  :func:`~treasury_core.testing.invariants.check_invariants` checks) and, against the previous
  step, :func:`~treasury_core.testing.invariants.check_history`;
- after each refusal, that nothing at all changed (invariant 8), and after each expiry run, that a
  second run finds nothing to do (invariant 7).

To test your own storage, build a test case from a factory::

    from treasury_core.testing.machines.ledger import ledger_machine_test_case

    TestMyStorageLedger = ledger_machine_test_case(make_my_storage)

The factory returns a :class:`~treasury_core.ports.storage.Storage` (closed after each run) or a
context manager yielding one (exited after each run: drop the schema there). Each run needs an
empty ledger.

Or subclass, override :meth:`LedgerMachine.make_storage`, and add rules and invariants of your
own next to the inherited ones, e.g. for the shapes of traffic your application produces::

    from hypothesis import strategies as st
    from hypothesis.stateful import invariant, precondition, rule
    from treasury_core.ledger import AccountKind, PendingCategory, Reserve
    from treasury_core.testing.machines.ledger import LedgerMachine

    class MyStorageLedger(LedgerMachine):
        max_amount = 5_000  # class attributes tune the inherited rules

        def make_storage(self) -> Storage:
            return MyStorage(...)

        @rule(data=st.data())
        def checkout_hold(self, data: st.DataObject) -> None:
            # Our checkout: a 15-minute hold from a wallet to the outside world.
            wallet = data.draw(st.sampled_from(self.model.wallets()))
            code = self.model.currency[wallet]
            world = self.system_account(AccountKind.WORLD, code)
            deadline = self.clock.now() + timedelta(minutes=15)
            hold = Reserve(wallet, world, code, 100, PendingCategory.HOLD, deadline)
            self.apply_journal([hold])  # storage and model must agree, even on a refusal

        @invariant()
        def my_extra_check(self) -> None:
            assert self.storage.my_consistency_check()

    TestMyStorageLedger = MyStorageLedger.TestCase

A rule of your own sees the run's :attr:`~LedgerMachine.storage`, :attr:`~LedgerMachine.clock`
(a :class:`~treasury_core.testing.fakes.clock.FakeClock`), :attr:`~LedgerMachine.model` (the
:class:`ReferenceLedger`: wallets, balances, room under the limit, pending movements, what is due)
and :attr:`~LedgerMachine.currencies`; it changes the ledger only through
:meth:`~LedgerMachine.apply_journal` (or :meth:`~LedgerMachine.expect_refusal`), so that the
model follows, and the inherited invariant checks the storage against it after every step.

This module needs Hypothesis (a test dependency).
"""

from __future__ import annotations

import unittest
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import ClassVar

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from treasury_core.errors import InsufficientFunds, LedgerRejected
from treasury_core.ledger import (
    Account,
    AccountKind,
    ExpirePending,
    Journal,
    LedgerPlan,
    Leg,
    Move,
    PendingMovement,
    PostPending,
    Reserve,
    VoidPending,
)
from treasury_core.ledger.invariants import (
    LedgerSnapshot,
    check_history,
    check_snapshot,
    read_ledger,
)
from treasury_core.ports.storage import UnitOfWork
from treasury_core.testing.machines.base import (
    StorageFactory,
    StorageMachine,
    bind_storage,
    storage_test_case,
)
from treasury_core.testing.machines.ledger_model import (
    COUNTER_FIELDS,
    Change,
    ModelPending,
    ReferenceLedger,
)
from treasury_core.testing.strategies import amounts, overdraft_limits, pending_categories

__all__ = [
    "LedgerMachine",
    "ModelPending",
    "ReferenceLedger",
    "StorageFactory",
    "ledger_machine",
    "ledger_machine_test_case",
]


class LedgerMachine(StorageMachine):
    """Random ledger operations through a storage port, checked against :class:`ReferenceLedger`.

    Subclass and override :meth:`make_storage` (or use :func:`ledger_machine`) to run it on your
    storage; tune :attr:`currency_pool`, :attr:`max_amount` and :attr:`max_wallets` as class
    attributes; add your own ``@rule`` and ``@invariant`` methods, which change the ledger through
    :meth:`apply_journal` (see the module docstring).

    Attributes a subclass may read: ``storage`` (the run's storage), ``clock`` (the run's
    :class:`~treasury_core.testing.fakes.clock.FakeClock`, the ``now`` every journal is applied at),
    ``model`` (the :class:`ReferenceLedger`) and ``currencies`` (this run's 2-3 codes).
    """

    #: Currencies each run draws its 2-3 from.
    currency_pool: ClassVar[tuple[str, ...]] = ("EUR", "GBP", "JPY", "USD")
    #: Largest generated amount; small enough that overdrafts and successes are both common.
    max_amount: ClassVar[int] = 10_000
    #: Most wallets a run opens.
    max_wallets: ClassVar[int] = 8

    def __init__(self) -> None:
        super().__init__()
        self.model = ReferenceLedger()
        self.currencies: list[str] = []
        self._journals = 0
        self._wallet_count = 0
        self._previous: LedgerSnapshot | None = None

    # Opening accounts -------------------------------------------------------------------------

    @initialize(data=st.data())
    def open_ledger(self, data: st.DataObject) -> None:
        """Per currency: world, FX liquidity and fees accounts (unguarded) and one wallet."""
        pool = st.sampled_from(sorted(self.currency_pool))
        self.currencies = data.draw(st.lists(pool, min_size=2, max_size=3, unique=True))
        accounts: list[Account] = []
        for code in self.currencies:
            for kind in (AccountKind.WORLD, AccountKind.FX_LIQUIDITY, AccountKind.FEES):
                accounts.append(Account(id=_system_id(kind, code), currency=code, kind=kind))
            accounts.append(self._new_wallet(code, data.draw(overdraft_limits(self.max_amount))))
        self._open(accounts)

    @precondition(lambda self: len(self.model.wallets()) < self.max_wallets)
    @rule(data=st.data())
    def open_wallet(self, data: st.DataObject) -> None:
        """Another guarded wallet, maybe with an overdraft limit."""
        code = data.draw(st.sampled_from(self.currencies))
        self._open([self._new_wallet(code, data.draw(overdraft_limits(self.max_amount)))])

    # Single-leg journals ----------------------------------------------------------------------

    @rule(data=st.data())
    def deposit(self, data: st.DataObject) -> None:
        """Money arrives from the outside world (never refused: the world is unguarded)."""
        wallet = data.draw(st.sampled_from(self.model.wallets()))
        world = _system_id(AccountKind.WORLD, self.model.currency[wallet])
        self._apply([Move(world, wallet, self.model.currency[wallet], data.draw(self._amounts()))])

    @rule(data=st.data())
    def move(self, data: st.DataObject) -> None:
        """Posted funds between any two accounts of one currency; near the limit half the time."""
        debit, credit, code = self._pair(data)
        self._apply([Move(debit, credit, code, data.draw(self._amounts(debit)))])

    @rule(data=st.data())
    def reserve(self, data: st.DataObject) -> None:
        """A hold or outgoing reservation, with or without a deadline."""
        self._apply([self._reserve_leg(data)])

    @precondition(lambda self: self.model.pendings)
    @rule(data=st.data())
    def post_pending(self, data: st.DataObject) -> None:
        """Post any reservation in full or in part (refused unless pending and before deadline)."""
        pending_id = data.draw(st.sampled_from(sorted(self.model.pendings)))
        amount = self.model.pendings[pending_id].amount
        part = data.draw(st.none() | st.integers(min_value=1, max_value=amount))
        self._apply([PostPending(pending_id, part)])

    @precondition(lambda self: self.model.pendings)
    @rule(data=st.data())
    def void_pending(self, data: st.DataObject) -> None:
        """Void any reservation (refused unless still pending)."""
        self._apply([VoidPending(data.draw(st.sampled_from(sorted(self.model.pendings))))])

    @precondition(lambda self: self.model.pendings)
    @rule(data=st.data())
    def expire_pending(self, data: st.DataObject) -> None:
        """Expire any reservation (refused unless pending and at or past its deadline)."""
        self._apply([ExpirePending(data.draw(st.sampled_from(sorted(self.model.pendings))))])

    # Time -------------------------------------------------------------------------------------

    @rule(
        seconds=st.integers(min_value=1, max_value=3600),
        expire_batch=st.none() | st.integers(min_value=1, max_value=3),
    )
    def advance_clock(self, seconds: int, expire_batch: int | None) -> None:
        """Business time moves on; then, maybe, the expiry job runs."""
        self.clock.advance(seconds)
        if expire_batch is not None:
            self.run_expiry_job(expire_batch)

    @precondition(lambda self: self._future_deadlines())
    @rule(data=st.data())
    def advance_to_deadline(self, data: st.DataObject) -> None:
        """Move time exactly onto a pending deadline: from now on it cannot be posted."""
        deadline = data.draw(st.sampled_from(self._future_deadlines()))
        self.clock.advance((deadline - self.clock.now()).total_seconds())
        if data.draw(st.booleans()):
            # The boundary itself: at the deadline a capture is already too late.
            due = [
                i for i in self.model.due(deadline) if self.model.pendings[i].deadline == deadline
            ]
            self._refused([PostPending(due[0])], LedgerRejected, "pending_expired")

    @rule(batch=st.integers(min_value=1, max_value=3))
    def run_expiry_job(self, batch: int) -> None:
        """Expire every due reservation, ``batch`` per journal; a second run changes nothing."""
        now = self.clock.now()
        due = [p.id for p in self._due_in_storage(now, limit=10_000)]
        assert due == self.model.due(now), f"storage finds due {due}, model {self.model.due(now)}"
        assert self._expiry_job(now, batch) == len(due)
        before = read_ledger(self.storage)
        # Invariant 7: running the job twice changes nothing.
        assert self._expiry_job(now, batch) == 0, "the second expiry run found due movements"
        assert read_ledger(self.storage) == before, "a second expiry run changed the ledger"

    def _expiry_job(self, now: datetime, batch: int) -> int:
        """What a scheduler would run: expire due movements page by page; how many it expired."""
        expired = 0
        while page := self._due_in_storage(now, limit=batch):
            self._apply([ExpirePending(p.id) for p in page], operation="expiry")
            expired += len(page)
            assert expired <= len(self.model.pendings), "the expiry job does not terminate"
        return expired

    # Multi-leg journals -----------------------------------------------------------------------

    @precondition(lambda self: len(self.currencies) >= 2)
    @rule(data=st.data(), with_fee=st.booleans())
    def fx_exchange(self, data: st.DataObject, with_fee: bool) -> None:
        """Sell one currency to FX liquidity, buy another from it, maybe pay a fee: all or none."""
        source, target = data.draw(
            st.lists(st.sampled_from(self.currencies), min_size=2, max_size=2, unique=True)
        )
        seller = data.draw(st.sampled_from(self.model.wallets(source)))
        buyer = data.draw(st.sampled_from(self.model.wallets(target)))
        legs: list[Leg] = [
            Move(
                seller,
                _system_id(AccountKind.FX_LIQUIDITY, source),
                source,
                data.draw(self._amounts(seller)),
            ),
            Move(
                _system_id(AccountKind.FX_LIQUIDITY, target),
                buyer,
                target,
                data.draw(self._amounts()),
            ),
        ]
        if with_fee:
            fee = data.draw(amounts(max(1, self.max_amount // 100)))
            legs.append(Move(seller, _system_id(AccountKind.FEES, source), source, fee))
        self._apply(legs, operation="fx")

    @rule(data=st.data(), size=st.integers(min_value=2, max_value=4))
    def multi_leg(self, data: st.DataObject, size: int) -> None:
        """Any mix of moves, reservations and resolutions in one journal, possibly refused."""
        legs: list[Leg] = []
        kinds = ["move", "reserve"] + (["post", "void", "expire"] if self.model.pendings else [])
        for _ in range(size):
            kind = data.draw(st.sampled_from(kinds))
            if kind == "move":
                debit, credit, code = self._pair(data)
                legs.append(Move(debit, credit, code, data.draw(self._amounts(debit))))
            elif kind == "reserve":
                legs.append(self._reserve_leg(data))
            else:
                pending_id = data.draw(st.sampled_from(sorted(self.model.pendings)))
                if kind == "post":
                    legs.append(
                        PostPending(pending_id, data.draw(st.none() | amounts(self.max_amount)))
                    )
                else:
                    legs.append(
                        VoidPending(pending_id) if kind == "void" else ExpirePending(pending_id)
                    )
        self._apply(legs)

    # Operations that must be refused ----------------------------------------------------------

    @rule(data=st.data())
    def overdraw_wallet(self, data: st.DataObject) -> None:
        """Debit one unit more than a wallet's available balance plus overdraft allows."""
        wallet = data.draw(st.sampled_from(self.model.wallets()))
        room = self.model.room(wallet)
        assert room is not None
        code = self.model.currency[wallet]
        target = data.draw(
            st.sampled_from([a for a in self.model.accounts_in(code) if a != wallet])
        )
        if data.draw(st.booleans()):
            self._refused(
                [Move(wallet, target, code, room + 1)], InsufficientFunds, "insufficient_funds"
            )
        else:
            category = data.draw(pending_categories())
            leg = Reserve(wallet, target, code, room + 1, category)
            self._refused([leg], InsufficientFunds, "insufficient_funds")

    @rule(data=st.data())
    def overdraw_after_valid_legs(self, data: st.DataObject) -> None:
        """Valid legs followed by an overdraft: the whole journal is refused, nothing applied."""
        legs: list[Leg] = [self._reserve_leg(data, from_system=True)]
        deposit_to = data.draw(st.sampled_from(self.model.wallets()))
        code = self.model.currency[deposit_to]
        deposit = data.draw(self._amounts())
        legs.append(Move(_system_id(AccountKind.WORLD, code), deposit_to, code, deposit))
        wallet = data.draw(st.sampled_from(self.model.wallets()))
        wallet_code = self.model.currency[wallet]
        room = self.model.room(wallet)
        assert room is not None
        # The deposit (if it is to the same wallet) counts: overdraw past it too.
        excess = room + (deposit if wallet == deposit_to else 0) + 1
        legs.append(Move(wallet, _system_id(AccountKind.WORLD, wallet_code), wallet_code, excess))
        self._refused(legs, InsufficientFunds, "insufficient_funds")

    @precondition(lambda self: self.model.due(self.clock.now()))
    @rule(data=st.data())
    def post_expired_pending(self, data: st.DataObject) -> None:
        """Posting at or after the deadline is refused even before the expiry job runs."""
        pending_id = data.draw(st.sampled_from(self.model.due(self.clock.now())))
        self._refused([PostPending(pending_id)], LedgerRejected, "pending_expired")

    @precondition(lambda self: self._resolved())
    @rule(data=st.data(), action=st.sampled_from(["post", "void", "expire"]))
    def resolve_resolved_pending(self, data: st.DataObject, action: str) -> None:
        """A posted, voided or expired movement cannot be resolved again."""
        pending_id = data.draw(st.sampled_from(self._resolved()))
        leg = _resolution(action, pending_id)
        self._refused([leg], LedgerRejected, "pending_already_resolved")

    @precondition(lambda self: self._postable())
    @rule(data=st.data())
    def overpost_pending(self, data: st.DataObject) -> None:
        """Posting more than was reserved is refused."""
        pending_id = data.draw(st.sampled_from(self._postable()))
        amount = self.model.pendings[pending_id].amount + data.draw(st.integers(1, 1000))
        self._refused([PostPending(pending_id, amount)], LedgerRejected, "amount_exceeds_pending")

    @precondition(lambda self: self._postable())
    @rule(data=st.data())
    def expire_early(self, data: st.DataObject) -> None:
        """Expiring before the deadline (or one without a deadline) is refused."""
        pending_id = data.draw(st.sampled_from(self._postable()))
        self._refused([ExpirePending(pending_id)], LedgerRejected, "pending_not_due")

    @precondition(lambda self: self.model.open_pendings())
    @rule(
        data=st.data(),
        first=st.sampled_from(["post", "void"]),
        second=st.sampled_from(["post", "void"]),
    )
    def resolve_twice_in_one_journal(self, data: st.DataObject, first: str, second: str) -> None:
        """One journal cannot resolve the same movement twice."""
        pending_id = data.draw(st.sampled_from(self.model.open_pendings()))
        if first == "post" and pending_id in self.model.due(self.clock.now()):
            first = "void"  # posting it would be refused as expired before the second leg
        legs = [_resolution(first, pending_id), _resolution(second, pending_id)]
        self._refused(legs, LedgerRejected, "pending_already_resolved")

    @rule(action=st.sampled_from(["post", "void", "expire"]))
    def resolve_unknown_pending(self, action: str) -> None:
        """A movement that does not exist cannot be resolved."""
        leg = _resolution(action, "no-such-pending")
        self._refused([leg], LedgerRejected, "pending_not_found")

    # For the rules of subclasses --------------------------------------------------------------

    def apply_journal(self, legs: Sequence[Leg], *, operation: str = "movement") -> None:
        """Apply ``legs`` as one journal, at ``clock.now()``, to the storage and the model.

        The model decides whether the journal must be accepted or refused (and with which error
        code); the storage must agree, and a refused journal must change nothing at all. Raises
        ``AssertionError`` (a finding) otherwise. Refusals are normal: rules may build any legs.
        """
        self._apply(list(legs), operation=operation)

    def expect_refusal(
        self, legs: Sequence[Leg], error: type[InsufficientFunds | LedgerRejected], code: str
    ) -> None:
        """Apply ``legs``, built to be refused with ``error`` and ``code``: the model must
        predict that refusal (else the rule itself is wrong) and the storage must then agree."""
        self._refused(list(legs), error, code)

    def system_account(self, kind: AccountKind, currency: str) -> str:
        """The id of the run's unguarded ``world``, ``fx_liquidity`` or ``fees`` account."""
        if kind is AccountKind.WALLET:
            raise ValueError("wallets are many: pick one from self.model.wallets(currency)")
        return _system_id(kind, currency)

    # Checks after every step ------------------------------------------------------------------

    @invariant()
    def ledger_is_sound_and_matches_model(self) -> None:
        """Invariants 1-7 on the stored ledger, history against the last step, and 13."""
        snapshot = read_ledger(self.storage)
        check_snapshot(snapshot)
        if self._previous is not None:
            check_history(self._previous, snapshot)
        self._previous = snapshot
        self._compare_with_model(snapshot)

    def _compare_with_model(self, snapshot: LedgerSnapshot) -> None:
        model = self.model
        stored = {a.id: a for a in snapshot.accounts}
        assert sorted(stored) == sorted(model.counters), (
            f"accounts differ: storage {sorted(stored)}, model {sorted(model.counters)}"
        )
        for account_id, account in stored.items():
            expected = (
                model.currency[account_id],
                model.kind[account_id],
                model.limit[account_id],
                *(model.counters[account_id][f] for f in COUNTER_FIELDS),
                model.balance(account_id),
                model.available(account_id),
            )
            actual = (
                account.currency,
                account.kind.value,
                account.overdraft_limit if account.guarded else None,
                *(getattr(account, f) for f in COUNTER_FIELDS),
                account.balance,
                account.available_balance,
            )
            assert actual == expected, f"account {account_id}: storage {actual}, model {expected}"
        pendings = {p.id: p for p in snapshot.pendings}
        assert sorted(pendings) == sorted(model.pendings), (
            f"pending movements differ: storage {sorted(pendings)}, model {sorted(model.pendings)}"
        )
        for pending_id, pending in pendings.items():
            mine = model.pendings[pending_id]
            actual_p = (
                pending.debit_account_id,
                pending.credit_account_id,
                pending.currency,
                pending.amount,
                pending.category.value,
                pending.deadline,
                pending.status.value,
                pending.resolved_by,
            )
            expected_p = (
                mine.debit,
                mine.credit,
                mine.currency,
                mine.amount,
                mine.category,
                mine.deadline,
                mine.status,
                mine.resolved_by,
            )
            assert actual_p == expected_p, (
                f"pending {pending_id}: storage {actual_p}, model {expected_p}"
            )
        assert len(snapshot.postings) == model.posting_count, (
            f"storage has {len(snapshot.postings)} postings, model {model.posting_count}"
        )

    # Helpers ----------------------------------------------------------------------------------

    def _apply(self, legs: list[Leg], *, operation: str = "movement") -> None:
        """Apply a journal to both; they must agree on acceptance, refusal and its code."""
        self._journals += 1
        journal = Journal(id=f"j{self._journals:06d}", legs=tuple(legs), operation=operation)
        now = self.clock.now()
        predicted = self.model.evaluate(journal, now)
        before = read_ledger(self.storage) if not isinstance(predicted, Change) else None
        refusal: InsufficientFunds | LedgerRejected | None = None
        try:
            self.storage.run_sync(_applier(journal, now))
        except (InsufficientFunds, LedgerRejected) as error:
            refusal = error
        if refusal is None:
            assert isinstance(predicted, Change), (
                f"storage accepted {journal}; the model expects {predicted}"
            )
            self.model.commit(predicted)
            return
        assert not isinstance(predicted, Change), (
            f"storage refused {journal} with {refusal!r}; the model accepts it"
        )
        assert (type(refusal), refusal.code) == predicted, (
            f"storage refused {journal} with {refusal!r}; the model expects {predicted}"
        )
        # Invariant 8: a refused journal changes nothing at all.
        assert read_ledger(self.storage) == before, f"refused {journal} changed the ledger"

    def _refused(
        self, legs: list[Leg], error: type[InsufficientFunds | LedgerRejected], code: str
    ) -> None:
        """Apply a journal built to be refused; the model must agree it is, then the storage."""
        journal = Journal(id="probe", legs=tuple(legs))
        predicted = self.model.evaluate(journal, self.clock.now())
        assert predicted == (error, code), (
            f"the model should refuse {legs} with {code}, not {predicted}"
        )
        self._apply(legs)

    def _open(self, accounts: list[Account]) -> None:
        def open_all(uow: UnitOfWork) -> None:
            for account in accounts:
                uow.ledger.open_account(account)

        self.storage.run_sync(open_all)
        for account in accounts:
            limit = account.overdraft_limit if account.guarded else None
            self.model.open(account.id, account.currency, account.kind.value, limit)

    def _new_wallet(self, code: str, limit: int) -> Account:
        number = self._wallet_count
        self._wallet_count += 1
        return Account(
            id=f"wallet-{number:03d}",
            currency=code,
            kind=AccountKind.WALLET,
            company_id=1 + number % 2,
            guarded=True,
            overdraft_limit=limit,
        )

    def _pair(self, data: st.DataObject) -> tuple[str, str, str]:
        """Two distinct accounts of one currency (debit, credit) and the currency."""
        code = data.draw(st.sampled_from(self.currencies))
        parties = self.model.accounts_in(code)
        debit = data.draw(st.sampled_from(parties))
        credit = data.draw(st.sampled_from([p for p in parties if p != debit]))
        return debit, credit, code

    def _amounts(self, debit: str | None = None) -> st.SearchStrategy[int]:
        """Amounts; for a guarded debit account, also exactly its room and one more."""
        room = None if debit is None else self.model.room(debit)
        edges = [] if room is None else [x for x in (room, room + 1) if x >= 1]
        anywhere = amounts(self.max_amount)
        return st.one_of(anywhere, st.sampled_from(edges)) if edges else anywhere

    def _reserve_leg(self, data: st.DataObject, *, from_system: bool = False) -> Reserve:
        if from_system:
            # From an unguarded account, so the reservation itself is never refused.
            code = data.draw(st.sampled_from(self.currencies))
            debit = _system_id(AccountKind.WORLD, code)
            credit = data.draw(
                st.sampled_from([a for a in self.model.accounts_in(code) if a != debit])
            )
        else:
            debit, credit, code = self._pair(data)
        amount = data.draw(self._amounts(debit))
        offset = data.draw(st.none() | st.integers(min_value=1, max_value=3600))
        deadline = None if offset is None else self.clock.now() + timedelta(seconds=offset)
        return Reserve(debit, credit, code, amount, data.draw(pending_categories()), deadline)

    def _future_deadlines(self) -> list[datetime]:
        now = self.clock.now()
        return sorted(
            {
                p.deadline
                for p in self.model.pendings.values()
                if p.status == "pending" and p.deadline is not None and p.deadline > now
            }
        )

    def _resolved(self) -> list[str]:
        return sorted(i for i, p in self.model.pendings.items() if p.status != "pending")

    def _postable(self) -> list[str]:
        """Reservations still pending and not yet due: postable, voidable, not expirable."""
        due = set(self.model.due(self.clock.now()))
        return [i for i in self.model.open_pendings() if i not in due]

    def _due_in_storage(self, now: datetime, *, limit: int) -> list[PendingMovement]:
        return self.storage.run_sync(lambda uow: uow.ledger.due_pendings(now, limit), write=False)


def _applier(journal: Journal, now: datetime) -> Callable[[UnitOfWork], LedgerPlan]:
    return lambda uow: uow.ledger.apply(journal, now)


def _resolution(action: str, pending_id: str) -> Leg:
    if action == "post":
        return PostPending(pending_id)
    if action == "void":
        return VoidPending(pending_id)
    return ExpirePending(pending_id)


def _system_id(kind: AccountKind, code: str) -> str:
    return f"{kind.value}-{code}"


def ledger_machine(
    factory: StorageFactory, *, name: str = "LedgerMachineForStorage"
) -> type[LedgerMachine]:
    """A :class:`LedgerMachine` subclass whose runs use ``factory()`` for storage.

    Run it with :func:`hypothesis.stateful.run_state_machine_as_test`, or take its ``TestCase``.
    """
    return bind_storage(LedgerMachine, factory, name)


def ledger_machine_test_case(
    factory: StorageFactory,
    *,
    settings: hypothesis.settings | None = None,
    name: str = "LedgerMachineForStorage",
) -> type[unittest.TestCase]:
    """A ``unittest.TestCase`` class running :class:`LedgerMachine` on ``factory()`` storages.

    Assign it to a module-level name starting with ``Test`` for pytest or unittest to collect.
    ``settings`` (e.g. ``settings(max_examples=50, stateful_step_count=30, deadline=None)``)
    defaults to Hypothesis's for state machines.
    """
    return storage_test_case(LedgerMachine, factory, settings, name)
