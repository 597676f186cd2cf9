"""A Hypothesis state machine that holds the treasury services to a plain reference model.

:class:`TreasuryMachine` wires a treasury with :func:`~treasury_core.bootstrap` (the sandbox FX
rates and bank rail, a :class:`~treasury_core.testing.fakes.clock.FakeClock`,
:class:`~treasury_core.testing.fakes.clock.SequentialIds`, a non-zero withdrawal fee rule) on a
storage
the caller supplies, opens two companies with wallets in 2-3 currencies, and then runs a random
sequence of service calls: deposits (completed with the announced amount or another one, or
failed), bank-account registrations and withdrawals (same and cross currency, completed or
failed), transfers (same currency, completed at once; cross currency, pending until completed or
failed), virtual accounts and the money arriving at them, and clock advances through
``treasury.sandbox.advance``, which settles everything that has fallen due (deposits and
withdrawals 24 hours after creation, cross-currency transfers after 60 seconds, as decisions.md
says). Operations built to be refused run too: overdrafts by one minor unit, settling a movement
that is already settled, unknown wallets and movements, another company's wallet, bank account
or movement, a transfer to the same wallet, currency mismatches, amounts over the maximum.

The same operations feed :class:`ReferenceTreasury`: per account three ints (``balance``,
``pending_in``, ``pending_out``; holds stay 0 here) and per movement its status and the record
fields it must show. The model computes FX amounts itself from the rate table (cross rates
through USD, ten significant digits, half-even) with :func:`treasury_core.money.convert` (the
documented rounding rule), and fees as ``fixed + round_half_even(amount * bps / 10_000)``. It
decides which operations must be refused (and with which error) and which movements a clock
advance settles; the services must agree. After every step the machine checks:

- every wallet's balance record (read through ``treasury.wallets.balances``) and every fee
  account's counters equal the model's;
- :func:`~treasury_core.testing.invariants.check_snapshot` on the stored ledger (what
  :func:`~treasury_core.testing.invariants.check_invariants` checks) and, against the previous
  step, :func:`~treasury_core.testing.invariants.check_history`;
- every stored deposit, withdrawal and transfer shows the model's status and amounts, the outbox
  holds exactly the events the model expects (one per settlement, per same-currency transfer, per
  virtual-account credit), and exactly the model's pending movements have a pending job;
- after each refusal, that nothing changed (invariant 8): ledger, records, wallets, events, jobs.
  The one allowance: a refused movement may leave behind the zero-balance system accounts
  (``world:``, ``fx:``, ``fees:``) of its currencies, which the services create in a transaction
  of their own before the business transaction.

To test your own storage, override :meth:`TreasuryMachine.make_storage` in a subclass, or build a
test case from a factory::

    from treasury_core.testing.machines.treasury import treasury_machine_test_case

    TestMyStorageTreasury = treasury_machine_test_case(make_my_storage)

The factory returns a migrated, empty :class:`~treasury_core.ports.storage.Storage` (closed after
each run) or a context manager yielding one (exited after each run). The machine does not migrate
it. The default FX adapter and bank rail are the sandbox's (``treasury_sandbox``).

This module needs Hypothesis (a test dependency).
"""

from __future__ import annotations

import unittest
from collections import Counter
from datetime import timedelta
from functools import partial

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from treasury_core.interface.projections import event_object
from treasury_core.ledger.invariants import (
    LedgerSnapshot,
    check_history,
    check_snapshot,
    read_ledger,
)
from treasury_core.movements.records import (
    TreasuryRecord,
)
from treasury_core.notifications.events import Event
from treasury_core.pagination import PageRequest
from treasury_core.ports.storage import UnitOfWork
from treasury_core.testing.machines.base import StorageFactory, bind_storage, storage_test_case
from treasury_core.testing.machines.treasury_model import (
    MALFORMED_IDS,
    MOVEMENT_KINDS,
    NOT_FOUND,
    UNKNOWN_SUFFIX,
    ModelAccount,
    ModelMovement,
    ReferenceTreasury,
    check_fields,
)
from treasury_core.testing.machines.treasury_operations import TreasuryOperations
from treasury_core.testing.strategies import amounts

__all__ = [
    "ModelAccount",
    "ModelMovement",
    "ReferenceTreasury",
    "StorageFactory",
    "TreasuryMachine",
    "treasury_machine",
    "treasury_machine_test_case",
]


class TreasuryMachine(TreasuryOperations):
    """Random treasury operations through the services, checked against :class:`ReferenceTreasury`.

    Subclass and override :meth:`make_storage` (or use :func:`treasury_machine`) to run it on your
    storage; :meth:`make_config`, :meth:`make_treasury` and :meth:`usd_rates` to change the
    wiring; tune the class attributes of :class:`TreasuryOperations`.
    """

    # Opening ------------------------------------------------------------------------------------

    @initialize(data=st.data())
    def open_treasury(self, data: st.DataObject) -> None:
        """Two companies, a fee rule, a wallet per currency (and one for the second company)."""
        pool = st.sampled_from(sorted(self.currency_pool))
        self.currencies = data.draw(st.lists(pool, min_size=2, max_size=3, unique=True))
        rules = st.tuples(st.integers(0, 100), st.integers(0, 500)).filter(lambda r: r != (0, 0))
        fees = {"*": data.draw(rules, label="fee rule")}
        override = data.draw(st.none() | rules, label="fee rule override")
        if override is not None:
            fees[self.currencies[0]] = override
        self.model.fee_rules = dict(fees)
        self._config = self.make_config(fees)
        self._treasury = self.make_treasury(self._config)
        if not self.model.usd:
            self.model.usd = self._quoted_usd_rates()
        for name in ("Company A", "Company B"):
            created = self._call(
                f"create {name}", partial(self.treasury.companies.create_company, name)
            )
            self.model.companies.append(created.company.id)
        self._examples = {
            fmt.currency: {f.name: f.example for f in fmt.fields}
            for fmt in self.treasury.bank_accounts.formats()
        }
        first, second = self.model.companies
        for code in self.currencies:
            self._create_wallet(first, code)
        self._create_wallet(second, data.draw(st.sampled_from(self.currencies)))
        # Start with money in most wallets and a bank account to withdraw to.
        for wallet in sorted(self.model.wallets.values(), key=lambda w: w.id):
            amount = data.draw(st.none() | amounts(self.max_amount), label="opening deposit")
            if amount is not None:
                movement = self._deposit(wallet.company_id, wallet.id, wallet.currency, amount)
                assert movement is not None
                self._settle(None, movement, "complete")
        self._register_bank_account(first, data.draw(st.sampled_from(self.currencies)))

    @precondition(lambda self: len(self.model.wallets) < self.max_wallets)
    @rule(data=st.data())
    def create_wallet(self, data: st.DataObject) -> None:
        """Another wallet, for either company, in one of the run's currencies."""
        company = data.draw(st.sampled_from(self.model.companies))
        self._create_wallet(company, data.draw(st.sampled_from(self.currencies)))

    @precondition(lambda self: len(self.model.bank_accounts) < self.max_bank_accounts)
    @rule(data=st.data())
    def register_bank_account(self, data: st.DataObject) -> None:
        """A withdrawal destination with the rail's example details for its currency."""
        company = data.draw(st.sampled_from(self.model.companies))
        code = data.draw(st.sampled_from(self.currencies + list(self.extra_bank_currencies)))
        self._register_bank_account(company, code)

    @precondition(lambda self: len(self.model.virtual_accounts) < self.max_virtual_accounts)
    @rule(data=st.data())
    def create_virtual_account(self, data: st.DataObject) -> None:
        """Dedicated incoming details for a wallet, in a virtual-account currency."""
        wallet = self.model.wallets[data.draw(st.sampled_from(sorted(self.model.wallets)))]
        code = data.draw(st.sampled_from(self.virtual_account_currencies))
        self._create_virtual_account(wallet.company_id, wallet.id, code)

    # Deposits -----------------------------------------------------------------------------------

    @rule(data=st.data())
    def create_deposit(self, data: st.DataObject) -> None:
        """Money announced into a wallet, in any of the run's currencies (``pending_in``)."""
        wallet = self.model.wallets[data.draw(st.sampled_from(sorted(self.model.wallets)))]
        source = data.draw(st.sampled_from(self.currencies))
        self._deposit(wallet.company_id, wallet.id, source, data.draw(amounts(self.max_amount)))

    @rule(data=st.data())
    def deposit_arrives(self, data: st.DataObject) -> None:
        """A deposit announced and delivered straight away: money for the wallets to move."""
        wallet = self.model.wallets[data.draw(st.sampled_from(sorted(self.model.wallets)))]
        source = data.draw(st.sampled_from(self.currencies))
        amount = data.draw(amounts(self.max_amount))
        movement = self._deposit(wallet.company_id, wallet.id, source, amount)
        if movement is not None:
            self._settle(data, movement, "complete")

    @precondition(lambda self: self.model.pending("deposit"))
    @rule(data=st.data())
    def complete_deposit(self, data: st.DataObject) -> None:
        """The bank delivers: the announced amount (said or not) or another one."""
        movement = self._draw_movement(data, self.model.pending("deposit"))
        announced = movement.fields["from_amount"]
        assert isinstance(announced, int)
        received = data.draw(st.none() | st.just(announced) | amounts(self.max_amount))
        self._settle(data, movement, "complete", received=received)

    @precondition(lambda self: self.model.pending("deposit"))
    @rule(data=st.data())
    def fail_deposit(self, data: st.DataObject) -> None:
        """The bank gives up: the expected credit is released."""
        self._settle(data, self._draw_movement(data, self.model.pending("deposit")), "fail")

    # Withdrawals --------------------------------------------------------------------------------

    @precondition(lambda self: self._withdrawal_routes())
    @rule(data=st.data())
    def create_withdrawal(self, data: st.DataObject) -> None:
        """Amount and fee reserved from a wallet towards a bank account (maybe converted)."""
        wallet, bank = data.draw(self._funded_first(self._withdrawal_routes()))
        amount = data.draw(self._spend_amounts(self._largest_withdrawal(wallet)))
        explicit = data.draw(st.booleans(), label="to_currency_id given")
        to_currency = self.model.bank_accounts[bank].currency if explicit else None
        self._withdraw(self.model.wallets[wallet].company_id, wallet, bank, amount, to_currency)

    @precondition(lambda self: self.model.pending("withdrawal"))
    @rule(data=st.data(), action=st.sampled_from(["complete", "fail"]))
    def settle_withdrawal(self, data: st.DataObject, action: str) -> None:
        """The bank pays out (amount and fee posted) or rejects it (both released)."""
        self._settle(data, self._draw_movement(data, self.model.pending("withdrawal")), action)

    # Transfers ----------------------------------------------------------------------------------

    @precondition(lambda self: self._transfer_pairs(cross=False))
    @rule(data=st.data())
    def transfer_same_currency(self, data: st.DataObject) -> None:
        """Between two wallets of one company and currency: completed at once."""
        self._draw_transfer(data, cross=False)

    @precondition(lambda self: self._transfer_pairs(cross=True))
    @rule(data=st.data())
    def transfer_cross_currency(self, data: st.DataObject) -> None:
        """Between currencies: pending (out of one, into the other) until settled."""
        self._draw_transfer(data, cross=True)

    @precondition(lambda self: self.model.pending("transfer"))
    @rule(data=st.data(), action=st.sampled_from(["complete", "fail"]))
    def settle_transfer(self, data: st.DataObject, action: str) -> None:
        """The conversion settles (both legs posted) or fails (both released)."""
        self._settle(data, self._draw_movement(data, self.model.pending("transfer")), action)

    # Virtual accounts ---------------------------------------------------------------------------

    @precondition(lambda self: self.model.virtual_accounts)
    @rule(data=st.data(), by_details=st.booleans())
    def virtual_account_incoming(self, data: st.DataObject, by_details: bool) -> None:
        """Funds arrive at a virtual account (by its id, or by the IBAN/number the rail reports)."""
        account_id = data.draw(st.sampled_from(sorted(self.model.virtual_accounts)))
        self._incoming(account_id, data.draw(amounts(self.max_amount)), by_details=by_details)

    # Time ---------------------------------------------------------------------------------------

    @rule(
        seconds=st.one_of(
            st.sampled_from([1, 59, 60, 61, 3600, 86_399, 86_400, 86_401, 2 * 86_400]),
            st.integers(min_value=1, max_value=120),
            st.integers(min_value=1, max_value=3 * 86_400),
        )
    )
    def advance_clock(self, seconds: int) -> None:
        """Business time moves on; whatever falls due settles."""
        self._advance(seconds)

    @precondition(lambda self: self.model.pending())
    @rule(data=st.data(), offset=st.sampled_from([-1, 0, 0, 1]))
    def advance_to_settlement(self, data: st.DataObject, offset: int) -> None:
        """Move time to a pending movement's due time: a second early, exactly, or just after."""
        movement = self._draw_movement(data, self.model.pending())
        assert movement.due_at is not None
        assert movement.due_at > self.model.now, (
            f"{movement.id} is still pending at {self.model.now}, due {movement.due_at}"
        )
        seconds = int((movement.due_at - self.model.now).total_seconds()) + offset
        self._advance(max(seconds, 1))

    # Operations that must be refused ------------------------------------------------------------

    @precondition(lambda self: self._withdrawal_routes())
    @rule(data=st.data())
    def overdraw_with_withdrawal(self, data: st.DataObject) -> None:
        """One minor unit more than amount plus fee can take from the available balance."""
        wallet, bank = data.draw(st.sampled_from(self._withdrawal_routes()))
        amount = self._largest_withdrawal(wallet) + 1
        company = self.model.wallets[wallet].company_id
        self._withdraw(company, wallet, bank, amount, None, must_refuse=True)

    @precondition(lambda self: self._transfer_pairs(cross=None))
    @rule(data=st.data())
    def overdraw_with_transfer(self, data: st.DataObject) -> None:
        """One minor unit more than the source wallet's available balance (either kind)."""
        source, target = data.draw(st.sampled_from(self._transfer_pairs(cross=None)))
        amount = self.model.account(source).available + 1
        company = self.model.wallets[source].company_id
        self._transfer(company, source, target, amount, must_refuse=True)

    @precondition(lambda self: self.model.settled())
    @rule(data=st.data(), action=st.sampled_from(["complete", "complete_amount", "fail"]))
    def settle_settled_movement(self, data: st.DataObject, action: str) -> None:
        """A completed or failed movement cannot be completed or failed again."""
        movement = self._draw_movement(data, self.model.settled())
        received = None
        if action == "complete_amount":
            action = "complete"
            if movement.kind == "deposit":
                received = data.draw(amounts(self.max_amount))
        self._settle(data, movement, action, received=received, must_refuse=True)

    @precondition(lambda self: self.model.movements)
    @rule(data=st.data(), action=st.sampled_from(["complete", "fail"]))
    def settle_as_another_company(self, data: st.DataObject, action: str) -> None:
        """Another company cannot settle a movement (it does not exist for them)."""
        movement = self._draw_movement(data, sorted(self.model.movements))
        other = self._other_company(movement.company_id)
        self._settle(data, movement, action, company=other, must_refuse=True)

    @rule(
        kind=st.sampled_from(["deposit", "withdrawal", "transfer"]),
        action=st.sampled_from(["complete", "fail"]),
    )
    def settle_unknown_movement(self, kind: str, action: str) -> None:
        """A movement that does not exist cannot be settled."""
        prefix = MOVEMENT_KINDS[kind].prefix
        ghost = ModelMovement(f"{prefix}_{UNKNOWN_SUFFIX}", kind, 0, (), None, "pending")
        self._settle(None, ghost, action, must_refuse=True)

    @rule(
        data=st.data(),
        operation=st.sampled_from(
            ["deposit", "withdrawal", "transfer_from", "transfer_to", "virtual_account", "balance"]
        ),
        whose=st.sampled_from(["unknown", "malformed", "other_company"]),
    )
    def refuse_foreign_wallet(self, data: st.DataObject, operation: str, whose: str) -> None:
        """An unknown wallet id, or another company's wallet: not found, nothing changes."""
        company = data.draw(st.sampled_from(self.model.companies))
        own = [w for w in sorted(self.model.wallets) if self.model.wallets[w].company_id == company]
        if whose == "other_company":
            others = sorted(set(self.model.wallets) - set(own))
            foreign = data.draw(st.sampled_from(others))
        elif whose == "unknown":
            foreign = f"wal_{UNKNOWN_SUFFIX}"
        else:
            foreign = data.draw(st.sampled_from(MALFORMED_IDS))
        amount = data.draw(amounts(self.max_amount))
        mine = data.draw(st.sampled_from(own))
        if operation == "deposit":
            self._deposit(company, foreign, self.currencies[0], amount, must_refuse=True)
        elif operation == "withdrawal":
            banks = [b.id for b in self.model.bank_accounts.values() if b.company_id == company]
            bank = data.draw(st.sampled_from(banks)) if banks else f"ba_{UNKNOWN_SUFFIX}"
            self._withdraw(company, foreign, bank, amount, None, must_refuse=True)
        elif operation == "transfer_from":
            self._transfer(company, foreign, mine, amount, must_refuse=True)
        elif operation == "transfer_to":
            self._transfer(company, mine, foreign, amount, must_refuse=True)
        elif operation == "virtual_account":
            code = data.draw(st.sampled_from(self.virtual_account_currencies))
            self._create_virtual_account(company, foreign, code, must_refuse=True)
        else:
            self._attempt(
                f"balance of {foreign!r} for company {company}",
                lambda: self.treasury.wallets.balance(company, foreign),
                NOT_FOUND,
                must_refuse=True,
            )

    @precondition(lambda self: self.model.bank_accounts)
    @rule(data=st.data(), whose=st.sampled_from(["unknown", "other_company"]))
    def withdraw_to_foreign_bank_account(self, data: st.DataObject, whose: str) -> None:
        """A bank account that is unknown, or another company's: not found."""
        wallet = self.model.wallets[data.draw(st.sampled_from(sorted(self.model.wallets)))]
        others = [
            b.id for b in self.model.bank_accounts.values() if b.company_id != wallet.company_id
        ]
        if whose == "other_company" and others:
            bank = data.draw(st.sampled_from(others))
        else:
            bank = f"ba_{UNKNOWN_SUFFIX}"
        amount = data.draw(amounts(self.max_amount))
        self._withdraw(wallet.company_id, wallet.id, bank, amount, None, must_refuse=True)

    @rule(
        data=st.data(),
        mistake=st.sampled_from(
            [
                "transfer_to_itself",
                "withdraw_other_currency",
                "withdraw_to_wrong_currency",
                "virtual_account_currency",
            ]
        ),
    )
    def refuse_mismatch(self, data: st.DataObject, mistake: str) -> None:
        """Same wallet both sides, currencies that do not match, no virtual accounts offered."""
        wallet = self.model.wallets[data.draw(st.sampled_from(sorted(self.model.wallets)))]
        company = wallet.company_id
        amount = data.draw(amounts(self.max_amount))
        banks = sorted(b.id for b in self.model.bank_accounts.values() if b.company_id == company)
        if mistake == "transfer_to_itself":
            self._transfer(company, wallet.id, wallet.id, amount, must_refuse=True)
        elif mistake == "virtual_account_currency" or not banks:
            code = self.no_virtual_account_currency
            self._create_virtual_account(company, wallet.id, code, must_refuse=True)
        else:
            bank = self.model.bank_accounts[data.draw(st.sampled_from(banks))]
            others = sorted(set(self.currencies) | {bank.currency})
            if mistake == "withdraw_other_currency":
                source = data.draw(st.sampled_from([c for c in others if c != wallet.currency]))
                self._withdraw(company, wallet.id, bank.id, amount, None, source, must_refuse=True)
            else:
                target = data.draw(st.sampled_from([c for c in others if c != bank.currency]))
                self._withdraw(company, wallet.id, bank.id, amount, target, must_refuse=True)

    @rule(
        data=st.data(),
        operation=st.sampled_from(
            ["deposit", "withdrawal", "transfer", "incoming", "complete_deposit"]
        ),
    )
    def refuse_too_large(self, data: st.DataObject, operation: str) -> None:
        """One minor unit over the configured maximum amount."""
        amount = self.config.max_amount + 1
        wallet = self.model.wallets[data.draw(st.sampled_from(sorted(self.model.wallets)))]
        company = wallet.company_id
        if operation == "withdrawal" and self._withdrawal_routes():
            source, bank = data.draw(st.sampled_from(self._withdrawal_routes()))
            company = self.model.wallets[source].company_id
            self._withdraw(company, source, bank, amount, None, must_refuse=True)
        elif operation == "transfer" and self._transfer_pairs(cross=None):
            source, target = data.draw(st.sampled_from(self._transfer_pairs(cross=None)))
            company = self.model.wallets[source].company_id
            self._transfer(company, source, target, amount, must_refuse=True)
        elif operation == "incoming" and self.model.virtual_accounts:
            account_id = data.draw(st.sampled_from(sorted(self.model.virtual_accounts)))
            self._incoming(account_id, amount, by_details=False, must_refuse=True)
        elif operation == "complete_deposit" and self.model.pending("deposit"):
            movement = self._draw_movement(data, self.model.pending("deposit"))
            self._settle(data, movement, "complete", received=amount, must_refuse=True)
        else:
            source = data.draw(st.sampled_from(self.currencies))
            self._deposit(company, wallet.id, source, amount, must_refuse=True)

    # Checks after every step --------------------------------------------------------------------

    @invariant()
    def treasury_matches_model(self) -> None:
        """Balance records, fee accounts, ledger invariants, records, events and jobs."""
        self._check_balances()
        snapshot = read_ledger(self.storage)
        check_snapshot(snapshot)
        if self._previous is not None:
            check_history(self._previous, snapshot)
        self._previous = snapshot
        self._check_system_accounts(snapshot)
        self._check_records_events_jobs()
        assert self.clock.now() == self.model.now, (
            f"the clock says {self.clock.now()}, the model {self.model.now}"
        )

    def _check_balances(self) -> None:
        for company in self.model.companies:
            page = self._call(
                f"balances of company {company}",
                partial(self.treasury.wallets.balances, company, PageRequest(limit=100)),
            )
            stored = {b.wallet_id: b for b in page.items}
            expected = sorted(w.id for w in self.model.wallets.values() if w.company_id == company)
            assert sorted(stored) == expected, (
                f"company {company}: balance records for {sorted(stored)}, wallets {expected}"
            )
            for wallet_id, record in stored.items():
                mine = self.model.account(wallet_id)
                actual = (
                    record.balance,
                    record.pending_in,
                    record.pending_out,
                    record.pending_holds,
                    record.available_balance,
                    record.currency_code,
                )
                want = (
                    mine.balance,
                    mine.pending_in,
                    mine.pending_out,
                    0,
                    mine.available,
                    self.model.wallets[wallet_id].currency,
                )
                assert actual == want, (
                    f"wallet {wallet_id} (balance, pending_in, pending_out, pending_holds, "
                    f"available, currency): stored {actual}, model {want}"
                )

    def _check_system_accounts(self, snapshot: LedgerSnapshot) -> None:
        """Fee accounts hold what the model expects (fees reserved, fees collected)."""
        stored = {a.id: a for a in snapshot.accounts}
        for account_id, mine in self.model.accounts.items():
            if account_id in self.model.wallets:
                continue
            account = stored.get(account_id)
            actual = (
                (0, 0, 0)
                if account is None
                else (
                    account.balance,
                    account.credits_pending,
                    account.debits_pending_out + account.debits_pending_holds,
                )
            )
            want = (mine.balance, mine.pending_in, mine.pending_out)
            assert actual == want, (
                f"account {account_id} (balance, pending_in, pending_out): "
                f"stored {actual}, model {want}"
            )

    def _check_records_events_jobs(self) -> None:
        companies = list(self.model.companies)
        horizon = self.model.now + timedelta(days=3650)

        def read(uow: UnitOfWork) -> tuple[dict[str, TreasuryRecord], list[Event], list[str]]:
            records: dict[str, TreasuryRecord] = {}
            for kind in MOVEMENT_KINDS.values():
                for company in companies:
                    for record in uow.records.list(kind, company, 10_000, None):
                        records[record.id] = record
            jobs = [j.resource_id for j in uow.jobs.due(horizon, 10_000)]
            return records, uow.outbox.list(None), jobs

        records, events, jobs = self.storage.run_sync(read, write=False, snapshot=True)
        assert sorted(records) == sorted(self.model.movements), (
            f"stored movements {sorted(records)}, model {sorted(self.model.movements)}"
        )
        for movement_id, movement in self.model.movements.items():
            check_fields(records[movement_id], movement.fields)
        fired = Counter((e.type.value, str(e.data["object"]["id"])) for e in events)
        assert fired == self.model.events, (
            f"events: stored {sorted(fired.items())}, model {sorted(self.model.events.items())}"
        )
        for event in events:
            # Events fire on reaching a final state, so they show the record as it is now.
            record = records[str(event.data["object"]["id"])]
            assert event.company_id == record.company_id, f"{event} is not {record.company_id}'s"
            assert event.data["object"] == event_object(record), (
                f"{event.type.value} {event.id} shows {event.data['object']}, "
                f"the record is {event_object(record)}"
            )
        assert sorted(jobs) == self.model.pending(), (
            f"pending jobs for {sorted(jobs)}, pending movements {self.model.pending()}"
        )


def treasury_machine(
    factory: StorageFactory, *, name: str = "TreasuryMachineForStorage"
) -> type[TreasuryMachine]:
    """A :class:`TreasuryMachine` subclass whose runs use ``factory()`` for storage.

    Run it with :func:`hypothesis.stateful.run_state_machine_as_test`, or take its ``TestCase``.
    """
    return bind_storage(TreasuryMachine, factory, name)


def treasury_machine_test_case(
    factory: StorageFactory,
    *,
    settings: hypothesis.settings | None = None,
    name: str = "TreasuryMachineForStorage",
) -> type[unittest.TestCase]:
    """A ``unittest.TestCase`` class running :class:`TreasuryMachine` on ``factory()`` storages.

    Assign it to a module-level name starting with ``Test`` for pytest or unittest to collect.
    """
    return storage_test_case(TreasuryMachine, factory, settings, name)
