"""A Hypothesis state machine that holds the treasury services to a plain reference model.

:class:`TreasuryMachine` wires a treasury with :func:`~treasury_core.bootstrap` (the sandbox FX
rates and bank rail, a :class:`~treasury_core.testing.clock.FakeClock`,
:class:`~treasury_core.testing.clock.SequentialIds`, a non-zero withdrawal fee rule) on a storage
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

    from treasury_core.testing.treasury_machine import treasury_machine_test_case

    TestMyStorageTreasury = treasury_machine_test_case(make_my_storage)

The factory returns a migrated, empty :class:`~treasury_core.ports.storage.Storage` (closed after
each run) or a context manager yielding one (exited after each run). The machine does not migrate
it. The default FX adapter and bank rail are the sandbox's (``treasury_sandbox``).

This module needs Hypothesis (a test dependency).
"""

from __future__ import annotations

import asyncio
import unittest
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal
from enum import StrEnum
from functools import partial
from typing import Any, ClassVar, TypeVar

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from treasury_core.bootstrap import Treasury, bootstrap
from treasury_core.config import TreasuryConfig
from treasury_core.currency import Currency, iso_currency
from treasury_core.errors import (
    InsufficientFunds,
    InvalidRequestError,
    NotFound,
    TreasuryError,
    ValidationFailed,
)
from treasury_core.events import Event
from treasury_core.ledger import Account, AccountKind
from treasury_core.ledger.invariants import (
    LedgerSnapshot,
    check_history,
    check_snapshot,
    read_ledger,
)
from treasury_core.money import convert
from treasury_core.pagination import PageRequest
from treasury_core.ports.storage import Storage, UnitOfWork
from treasury_core.testing.clock import FakeClock, SequentialIds
from treasury_core.testing.machine import StorageFactory, bind_storage, storage_test_case
from treasury_core.testing.memory import MemoryStorage
from treasury_core.testing.strategies import amounts
from treasury_core.treasury.movements import fee_account
from treasury_core.treasury.records import (
    BankAccount,
    Deposit,
    Transfer,
    TreasuryRecord,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.treasury.requests import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateVirtualAccountRequest,
    CreateWithdrawalRequest,
    RegisterBankAccountRequest,
)
from treasury_core.wallets import CreateWalletRequest

__all__ = [
    "ModelAccount",
    "ModelMovement",
    "ReferenceTreasury",
    "StorageFactory",
    "TreasuryMachine",
    "treasury_machine",
    "treasury_machine_test_case",
]

T = TypeVar("T")

#: What a test supplies: a fresh, empty, migrated storage, or a context manager yielding one.

#: A predicted refusal: the exception class and its ``code``.
Refusal = tuple[type[TreasuryError], str]

NOT_FOUND: Refusal = (NotFound, "resource_missing")
INSUFFICIENT: Refusal = (InsufficientFunds, "insufficient_funds")
TOO_SMALL: Refusal = (ValidationFailed, "amount_too_small")
TOO_LARGE: Refusal = (ValidationFailed, "amount_too_large")
MISMATCH: Refusal = (ValidationFailed, "currency_mismatch")
SAME_WALLET: Refusal = (ValidationFailed, "same_wallet")
NO_VIRTUAL_ACCOUNT: Refusal = (ValidationFailed, "virtual_account_unavailable")
NOT_PENDING: Refusal = (InvalidRequestError, "movement_not_pending")

#: A well-formed id that no run ever hands out, and ids that are not wallet ids at all.
_UNKNOWN_SUFFIX = "9" * 26
_MALFORMED_IDS = ("wal_nope!", "nope", f"dep_{_UNKNOWN_SUFFIX}")  # wrong shape, wrong kind

#: The record kinds whose rows the "nothing changed" check compares.
_RECORD_KINDS: tuple[type[TreasuryRecord], ...] = (
    Deposit,
    Withdrawal,
    Transfer,
    BankAccount,
    VirtualAccount,
)
_MOVEMENT_KINDS: Mapping[str, type[TreasuryRecord]] = {
    "deposit": Deposit,
    "withdrawal": Withdrawal,
    "transfer": Transfer,
}
_SYSTEM_KINDS = frozenset({AccountKind.WORLD, AccountKind.FX_LIQUIDITY, AccountKind.FEES})
_COUNTERS = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)
_TEN_DIGITS = Context(prec=10, rounding=ROUND_HALF_EVEN)


# The reference model ---------------------------------------------------------------------------


@dataclass
class ModelAccount:
    """The model's view of one account: what its balance record shows (holds are always 0)."""

    balance: int = 0
    pending_in: int = 0
    pending_out: int = 0

    @property
    def available(self) -> int:
        """Balance less what outgoing reservations set aside; ``pending_in`` never counts."""
        return self.balance - self.pending_out


@dataclass(frozen=True)
class ModelWallet:
    """A wallet: whose it is and its currency."""

    id: str
    company_id: int
    currency: str


@dataclass(frozen=True)
class ModelBankAccount:
    """A registered withdrawal destination."""

    id: str
    company_id: int
    currency: str


@dataclass(frozen=True)
class ModelVirtualAccount:
    """A virtual account: the wallet it credits, its currency and the key incoming funds name."""

    id: str
    company_id: int
    wallet_id: str
    currency: str
    key: str


#: A movement's effect on the modelled accounts: (account id, amount), positive for a credit.
Legs = tuple[tuple[str, int], ...]


@dataclass
class ModelMovement:
    """A deposit, withdrawal or transfer: its legs, due time, status and expected record fields."""

    id: str
    kind: str  # "deposit", "withdrawal" or "transfer"
    company_id: int
    legs: Legs
    due_at: datetime | None
    status: str
    fields: dict[str, object] = field(default_factory=dict)
    rate: Decimal = Decimal(1)


class ReferenceTreasury:
    """The simplest treasury that could work: three ints per account, a dict of movements.

    Written from decisions.md and ledger-invariants.md, independently of the services: it knows
    which wallet each movement credits or debits and by how much, and when the sandbox settles it.
    Only wallets and fee accounts are modelled (world and FX liquidity are unguarded and follow
    from invariant 2, which the ledger checks cover).
    """

    def __init__(
        self, start: datetime, usd_rates: Mapping[str, str], delays: Mapping[str, int]
    ) -> None:
        self.now = start
        self.usd = {code: Decimal(str(rate)) for code, rate in usd_rates.items()}
        self.delays = dict(delays)
        self.fee_rules: dict[str, tuple[int, int]] = {"*": (0, 0)}
        self.companies: list[int] = []
        self.accounts: dict[str, ModelAccount] = {}
        self.wallets: dict[str, ModelWallet] = {}
        self.movements: dict[str, ModelMovement] = {}
        self.bank_accounts: dict[str, ModelBankAccount] = {}
        self.virtual_accounts: dict[str, ModelVirtualAccount] = {}
        self.events: Counter[tuple[str, str]] = Counter()
        self._currencies: dict[str, Currency] = {}

    # Money --------------------------------------------------------------------------------------

    def rate(self, source: str, target: str) -> Decimal:
        """Major units of ``target`` per major unit of ``source``: through USD, 10 digits."""
        if source == target:
            return Decimal(1)
        return _TEN_DIGITS.divide(self.usd[target], self.usd[source])

    def convert(self, amount: int, source: str, target: str, rate: Decimal | None = None) -> int:
        """``amount`` minor units of ``source`` in minor units of ``target`` (the one rule)."""
        if source == target:
            return amount
        rate = self.rate(source, target) if rate is None else rate
        return convert(amount, self._currency(source), self._currency(target), rate)

    def fee(self, currency: str, amount: int) -> int:
        """The withdrawal fee: ``fixed + round_half_even(amount * bps / 10_000)``."""
        fixed, bps = self.fee_rules.get(currency, self.fee_rules["*"])
        quotient, remainder = divmod(amount * bps, 10_000)
        if 2 * remainder > 10_000 or (2 * remainder == 10_000 and quotient % 2 == 1):
            quotient += 1
        return fixed + quotient

    def _currency(self, code: str) -> Currency:
        if code not in self._currencies:
            self._currencies[code] = iso_currency(code)
        return self._currencies[code]

    # Lookups ------------------------------------------------------------------------------------

    def account(self, account_id: str) -> ModelAccount:
        """The account's counters (created at zero on first use)."""
        return self.accounts.setdefault(account_id, ModelAccount())

    def wallet_of(self, company_id: int, wallet_id: str) -> ModelWallet | None:
        """The company's wallet, or ``None`` (unknown, or another company's)."""
        wallet = self.wallets.get(wallet_id)
        return wallet if wallet is not None and wallet.company_id == company_id else None

    def pending(self, *kinds: str) -> list[str]:
        """Ids of pending movements (of ``kinds`` if given), sorted."""
        return sorted(
            m.id
            for m in self.movements.values()
            if m.status == "pending" and (not kinds or m.kind in kinds)
        )

    def settled(self) -> list[str]:
        """Ids of completed or failed movements, sorted."""
        return sorted(m.id for m in self.movements.values() if m.status != "pending")

    # Changes ------------------------------------------------------------------------------------

    def add_wallet(self, wallet: ModelWallet) -> None:
        """A new wallet, empty."""
        self.wallets[wallet.id] = wallet
        self.account(wallet.id)

    def move(self, legs: Legs) -> None:
        """Posted at once (same-currency transfers, virtual-account credits)."""
        for account_id, amount in legs:
            self.account(account_id).balance += amount

    def open(self, movement: ModelMovement, delay: str) -> None:
        """A pending movement: reserve its legs; the sandbox settles it after ``delay``."""
        movement.due_at = self.now + timedelta(seconds=self.delays[delay])
        for account_id, amount in movement.legs:
            account = self.account(account_id)
            if amount > 0:
                account.pending_in += amount
            else:
                account.pending_out -= amount
        self.movements[movement.id] = movement

    def record(self, movement: ModelMovement, event: str | None) -> None:
        """A movement already settled when created (and the event it fires, if any)."""
        self.movements[movement.id] = movement
        if event is not None:
            self.events[(event, movement.id)] += 1

    def settle(self, movement_id: str, status: str, received: int | None = None) -> None:
        """Complete (post; a deposit may receive another sum) or fail (release) a movement."""
        movement = self.movements[movement_id]
        assert movement.status == "pending", f"the model settles {movement_id} twice"
        for account_id, amount in movement.legs:
            account = self.account(account_id)
            if amount > 0:
                account.pending_in -= amount
            else:
                account.pending_out += amount
            if status == "completed" and received is None:
                account.balance += amount
        if status == "completed" and received is not None:
            # The bank delivered another sum: credit it, converted at the deposit's rate.
            wallet_id = movement.legs[0][0]
            wallet = self.wallets[wallet_id]
            source = str(movement.fields["from_currency_id"])
            to_amount = self.convert(received, source, wallet.currency, movement.rate)
            self.account(wallet_id).balance += to_amount
            movement.fields.update(from_amount=received, to_amount=to_amount)
        movement.status = status
        movement.fields["status"] = status
        if status == "failed":
            movement.fields["error"] = f"{movement.kind}_failed"
        self.events[(f"treasury.{movement.kind}.{status}", movement_id)] += 1

    def advance(self, seconds: int) -> list[str]:
        """Move time on and complete every pending movement now due; the ids completed."""
        self.now += timedelta(seconds=seconds)
        due = [
            m.id
            for m in self.movements.values()
            if m.status == "pending" and m.due_at is not None and m.due_at <= self.now
        ]
        for movement_id in sorted(due):
            self.settle(movement_id, "completed")
        return due


# The machine -----------------------------------------------------------------------------------


class TreasuryMachine(RuleBasedStateMachine):
    """Random treasury operations through the services, checked against :class:`ReferenceTreasury`.

    Subclass and override :meth:`make_storage` (or use :func:`treasury_machine`) to run it on your
    storage; :meth:`make_config`, :meth:`make_treasury` and :meth:`usd_rates` to change the
    wiring; tune the class attributes below.
    """

    #: Currencies each run draws its 2-3 wallet currencies from (KWD has 3 decimals, JPY none).
    currency_pool: ClassVar[tuple[str, ...]] = ("EUR", "GBP", "JPY", "KWD", "USD")
    #: Bank accounts may also be in these (a withdrawal to a currency no wallet holds).
    extra_bank_currencies: ClassVar[tuple[str, ...]] = ("CHF",)
    #: Currencies with virtual accounts (the sandbox default, decisions.md).
    virtual_account_currencies: ClassVar[tuple[str, ...]] = ("EUR", "GBP", "USD")
    #: An enabled currency without virtual accounts (asked for one, the service must refuse).
    no_virtual_account_currency: ClassVar[str] = "JPY"
    #: Settlement delays the sandbox must keep, in seconds (decisions.md, "Sandbox controls").
    settlement_delays: ClassVar[Mapping[str, int]] = {
        "deposit": 24 * 3600,
        "withdrawal": 24 * 3600,
        "fx_transfer": 60,
    }
    #: Largest generated amount; small enough that overdrafts and successes are both common.
    max_amount: ClassVar[int] = 10_000
    #: Most wallets, bank accounts and virtual accounts a run opens.
    max_wallets: ClassVar[int] = 8
    max_bank_accounts: ClassVar[int] = 5
    max_virtual_accounts: ClassVar[int] = 4

    def __init__(self) -> None:
        super().__init__()
        self._resources = ExitStack()
        made = self.make_storage()
        if isinstance(made, Storage):
            self._resources.callback(made.close)
            self.storage: Storage = made
        else:
            self.storage = self._resources.enter_context(made)
        # One event loop for the machine's lifetime: the services are async, the rules are not.
        self.loop = asyncio.new_event_loop()
        self._resources.callback(self.loop.close)
        self.clock = FakeClock()
        self.ids = SequentialIds()
        self.model = ReferenceTreasury(
            self.clock.now(), self.usd_rates() or {}, self.settlement_delays
        )
        self.currencies: list[str] = []
        self._treasury: Treasury | None = None
        self._config: TreasuryConfig | None = None
        self._examples: dict[str, dict[str, str]] = {}
        self._previous: LedgerSnapshot | None = None
        self._wallet_count = 0

    # Hooks --------------------------------------------------------------------------------------

    def make_storage(self) -> Storage | AbstractContextManager[Storage]:
        """The empty, migrated storage for one run (default: a MemoryStorage). Override this."""
        return MemoryStorage()

    def make_config(self, withdrawal_fees: dict[str, tuple[int, int]]) -> TreasuryConfig:
        """The configuration: sandbox adapters, this run's fee rule."""
        return TreasuryConfig(database_url="memory://", withdrawal_fees=withdrawal_fees)

    def make_treasury(self, config: TreasuryConfig) -> Treasury:
        """Wire the treasury on the run's storage, fake clock and sequential ids."""
        return bootstrap(
            config, storage=self.storage, clock=self.clock, ids=self.ids, migrate=False
        )

    def usd_rates(self) -> Mapping[str, str] | None:
        """The FX table (units per US dollar) the configured FX adapter quotes from.

        Default ``None``: once the treasury is wired, the model asks the configured FX adapter
        for one US dollar in each currency the run can use, so the testing kit needs no adapter
        of its own. The model derives cross rates from the table itself; an adapter whose cross
        rates do not go through the dollar this way needs this hook overridden.
        """
        return None

    def teardown(self) -> None:
        """Close the event loop and the run's storage (or exit its context manager)."""
        self._resources.close()

    @property
    def treasury(self) -> Treasury:
        """The wired treasury (after the first step)."""
        assert self._treasury is not None, "the treasury is wired by the initialize rule"
        return self._treasury

    @property
    def config(self) -> TreasuryConfig:
        """The run's configuration."""
        assert self._config is not None, "the treasury is wired by the initialize rule"
        return self._config

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
        prefix = _MOVEMENT_KINDS[kind].prefix
        ghost = ModelMovement(f"{prefix}_{_UNKNOWN_SUFFIX}", kind, 0, (), None, "pending")
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
            foreign = f"wal_{_UNKNOWN_SUFFIX}"
        else:
            foreign = data.draw(st.sampled_from(_MALFORMED_IDS))
        amount = data.draw(amounts(self.max_amount))
        mine = data.draw(st.sampled_from(own))
        if operation == "deposit":
            self._deposit(company, foreign, self.currencies[0], amount, must_refuse=True)
        elif operation == "withdrawal":
            banks = [b.id for b in self.model.bank_accounts.values() if b.company_id == company]
            bank = data.draw(st.sampled_from(banks)) if banks else f"ba_{_UNKNOWN_SUFFIX}"
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
            bank = f"ba_{_UNKNOWN_SUFFIX}"
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
            for kind in _MOVEMENT_KINDS.values():
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
            _check_fields(records[movement_id], movement.fields)
        fired = Counter((e.type.value, str(e.data["object"]["id"])) for e in events)
        assert fired == self.model.events, (
            f"events: stored {sorted(fired.items())}, model {sorted(self.model.events.items())}"
        )
        for event in events:
            # Events fire on reaching a final state, so they show the record as it is now.
            record = records[str(event.data["object"]["id"])]
            assert event.company_id == record.company_id, f"{event} is not {record.company_id}'s"
            assert event.data["object"] == record.api(), (
                f"{event.type.value} {event.id} shows {event.data['object']}, "
                f"the record is {record.api()}"
            )
        assert sorted(jobs) == self.model.pending(), (
            f"pending jobs for {sorted(jobs)}, pending movements {self.model.pending()}"
        )

    # Operations (each predicts, calls the service, compares and commits) -----------------------

    def _create_wallet(self, company: int, code: str) -> None:
        self._wallet_count += 1
        request = CreateWalletRequest(name=f"Wallet {self._wallet_count}", currency_id=code)
        wallet = self._call(
            f"create a {code} wallet", lambda: self.treasury.wallets.create(company, request)
        )
        assert (wallet.company_id, wallet.currency) == (company, code), wallet
        self.model.add_wallet(ModelWallet(wallet.id, company, code))

    def _register_bank_account(self, company: int, code: str) -> None:
        example = self._examples[code]
        request = RegisterBankAccountRequest(
            bank_name=example["bank_name"],
            account_name=example["account_name"],
            account_number=example["account_number"],
            routing_number=example["routing_number"],
            currency_id=code,
        )
        bank = self._call(
            f"register a {code} bank account",
            lambda: self.treasury.bank_accounts.register(company, request),
        )
        assert (bank.company_id, bank.currency_id) == (company, code), bank
        self.model.bank_accounts[bank.id] = ModelBankAccount(bank.id, company, code)

    def _create_virtual_account(
        self, company: int, wallet_id: str, code: str, *, must_refuse: bool = False
    ) -> None:
        wallet = self.model.wallet_of(company, wallet_id)
        expected: Refusal | None = None
        if code not in self.virtual_account_currencies:
            expected = NO_VIRTUAL_ACCOUNT
        elif wallet is None:
            expected = NOT_FOUND
        request = CreateVirtualAccountRequest(wallet_id=wallet_id, source_currency=code)
        account = self._attempt(
            f"create a {code} virtual account for {wallet_id!r} as company {company}",
            lambda: self.treasury.virtual_accounts.create(company, request),
            expected,
            must_refuse=must_refuse,
        )
        if account is None:
            return
        assert wallet is not None
        assert (account.company_id, account.wallet_id, account.source_currency) == (
            company,
            wallet.id,
            code,
        ), account
        key = account.iban or account.account_number
        assert key is not None, f"virtual account {account.id} has neither IBAN nor number"
        self.model.virtual_accounts[account.id] = ModelVirtualAccount(
            account.id, company, wallet.id, code, key
        )

    def _deposit(
        self, company: int, wallet_id: str, source: str, amount: int, *, must_refuse: bool = False
    ) -> ModelMovement | None:
        model = self.model
        wallet = model.wallet_of(company, wallet_id)
        expected: Refusal | None = None
        rate, to_amount = Decimal(1), amount
        if amount > self.config.max_amount:
            expected = TOO_LARGE
        elif wallet is None:
            expected = NOT_FOUND
        else:
            rate = model.rate(source, wallet.currency)
            to_amount = model.convert(amount, source, wallet.currency, rate)
            if to_amount <= 0:
                expected = TOO_SMALL
        request = CreateDepositRequest(
            wallet_id=wallet_id, from_amount=amount, from_currency_id=source
        )
        deposit = self._attempt(
            f"deposit of {amount} {source} into {wallet_id!r} as company {company}",
            lambda: self.treasury.deposits.create(company, request),
            expected,
            must_refuse=must_refuse,
        )
        if deposit is None:
            return None
        assert wallet is not None
        fields: dict[str, object] = {
            "status": "pending",
            "company_id": company,
            "wallet_id": wallet.id,
            "from_amount": amount,
            "from_currency_id": source,
            "to_amount": to_amount,
            "to_currency_id": wallet.currency,
            "exchange_rate_from_to": rate,
            "error": None,
        }
        _check_fields(deposit, fields)
        legs: Legs = ((wallet.id, to_amount),)
        movement = ModelMovement(
            deposit.id, "deposit", company, legs, None, "pending", fields, rate
        )
        model.open(movement, "deposit")
        return movement

    def _withdraw(
        self,
        company: int,
        wallet_id: str,
        bank_id: str,
        amount: int,
        to_currency: str | None,
        from_currency: str | None = None,
        *,
        must_refuse: bool = False,
    ) -> None:
        model = self.model
        wallet = model.wallet_of(company, wallet_id)
        bank = model.bank_accounts.get(bank_id)
        if bank is not None and bank.company_id != company:
            bank = None
        source = from_currency or (wallet.currency if wallet is not None else self.currencies[0])
        expected: Refusal | None = None
        rate, to_amount, fee = Decimal(1), amount, 0
        if amount > self.config.max_amount:
            expected = TOO_LARGE
        elif wallet is None or bank is None:
            expected = NOT_FOUND
        elif source != wallet.currency or to_currency not in (None, bank.currency):
            expected = MISMATCH
        else:
            rate = model.rate(source, bank.currency)
            to_amount = model.convert(amount, source, bank.currency, rate)
            fee = model.fee(source, amount)
            if to_amount <= 0:
                expected = TOO_SMALL
            elif amount + fee > model.account(wallet.id).available:
                expected = INSUFFICIENT
        request = CreateWithdrawalRequest(
            wallet_id=wallet_id,
            from_amount=amount,
            from_currency_id=source,
            to_currency_id=to_currency,
            bank_account_id=bank_id,
        )
        withdrawal = self._attempt(
            f"withdrawal of {amount} {source} from {wallet_id!r} to {bank_id!r} "
            f"(to_currency_id {to_currency}) as company {company}",
            lambda: self.treasury.withdrawals.create(company, request),
            expected,
            must_refuse=must_refuse,
        )
        if withdrawal is None:
            return
        assert wallet is not None
        assert bank is not None
        fields: dict[str, object] = {
            "status": "pending",
            "company_id": company,
            "wallet_id": wallet.id,
            "bank_account_id": bank.id,
            "from_amount": amount,
            "from_currency_id": source,
            "to_amount": to_amount,
            "to_currency_id": bank.currency,
            "exchange_rate_from_to": rate,
            "withdraw_fee": fee,
            "error": None,
        }
        _check_fields(withdrawal, fields)
        legs: Legs = ((wallet.id, -(amount + fee)),)
        if fee:
            legs += ((fee_account(source).id, fee),)
        movement = ModelMovement(
            withdrawal.id, "withdrawal", company, legs, None, "pending", fields, rate
        )
        model.open(movement, "withdrawal")

    def _transfer(
        self, company: int, source_id: str, target_id: str, amount: int, *, must_refuse: bool
    ) -> None:
        model = self.model
        source = model.wallet_of(company, source_id)
        target = model.wallet_of(company, target_id)
        expected: Refusal | None = None
        rate, to_amount = Decimal(1), amount
        if amount > self.config.max_amount:
            expected = TOO_LARGE
        elif source_id == target_id:
            expected = SAME_WALLET
        elif source is None or target is None:
            expected = NOT_FOUND
        else:
            rate = model.rate(source.currency, target.currency)
            to_amount = model.convert(amount, source.currency, target.currency, rate)
            if to_amount <= 0:
                expected = TOO_SMALL
            elif amount > model.account(source.id).available:
                expected = INSUFFICIENT
        request = CreateTransferRequest(
            from_wallet_id=source_id, to_wallet_id=target_id, from_amount=amount
        )
        transfer = self._attempt(
            f"transfer of {amount} from {source_id!r} to {target_id!r} as company {company}",
            lambda: self.treasury.transfers.create(company, request),
            expected,
            must_refuse=must_refuse,
        )
        if transfer is None:
            return
        assert source is not None
        assert target is not None
        cross = source.currency != target.currency
        fields: dict[str, object] = {
            "status": "pending" if cross else "completed",
            "company_id": company,
            "from_wallet_id": source.id,
            "to_wallet_id": target.id,
            "from_amount": amount,
            "from_currency_id": source.currency,
            "to_amount": to_amount,
            "to_currency_id": target.currency,
            "exchange_rate_from_to": rate,
            "error": None,
        }
        _check_fields(transfer, fields)
        legs: Legs = ((source.id, -amount), (target.id, to_amount))
        if cross:
            movement = ModelMovement(
                transfer.id, "transfer", company, legs, None, "pending", fields, rate
            )
            model.open(movement, "fx_transfer")
        else:
            model.move(legs)
            movement = ModelMovement(
                transfer.id, "transfer", company, legs, None, "completed", fields, rate
            )
            model.record(movement, "treasury.transfer.completed")

    def _incoming(
        self, account_id: str, amount: int, *, by_details: bool, must_refuse: bool = False
    ) -> None:
        model = self.model
        account = model.virtual_accounts[account_id]
        wallet = model.wallets[account.wallet_id]
        rate = model.rate(account.currency, wallet.currency)
        to_amount = model.convert(amount, account.currency, wallet.currency, rate)
        expected: Refusal | None = None
        if amount > self.config.max_amount:
            expected = TOO_LARGE
        elif to_amount <= 0:
            expected = TOO_SMALL
        service = self.treasury.virtual_accounts
        deposit = self._attempt(
            f"{amount} {account.currency} arriving at {account_id} "
            f"({'by ' + account.key if by_details else 'by id'})",
            lambda: (
                service.credit_by_details(account.key, account.currency, amount, "incoming")
                if by_details
                else service.incoming(account_id, amount, "incoming")
            ),
            expected,
            must_refuse=must_refuse,
        )
        if deposit is None:
            return
        fields: dict[str, object] = {
            "status": "completed",
            "company_id": account.company_id,
            "wallet_id": wallet.id,
            "virtual_account_id": account_id,
            "from_amount": amount,
            "from_currency_id": account.currency,
            "to_amount": to_amount,
            "to_currency_id": wallet.currency,
            "exchange_rate_from_to": rate,
            "error": None,
        }
        _check_fields(deposit, fields)
        legs: Legs = ((wallet.id, to_amount),)
        model.move(legs)
        movement = ModelMovement(
            deposit.id, "deposit", account.company_id, legs, None, "completed", fields, rate
        )
        model.record(movement, "treasury.deposit.completed")

    def _settle(
        self,
        data: st.DataObject | None,
        movement: ModelMovement,
        action: str,
        *,
        received: int | None = None,
        company: int | None = None,
        must_refuse: bool = False,
    ) -> None:
        """Complete or fail ``movement`` through its service, as ``company`` (or unscoped)."""
        if company is None and data is not None:
            # The sandbox controls settle unscoped; the service also takes the owner's id.
            company = data.draw(st.none() | st.just(movement.company_id), label="scoped to")
        expected: Refusal | None = None
        if received is not None and received > self.config.max_amount:
            expected = TOO_LARGE
        elif movement.id not in self.model.movements or (
            company is not None and company != movement.company_id
        ):
            expected = NOT_FOUND
        elif movement.status != "pending":
            expected = NOT_PENDING
        elif self._converts_to_nothing(movement, action, received):
            expected = TOO_SMALL
        call: Callable[[], Coroutine[Any, Any, TreasuryRecord]]
        t, key = self.treasury, movement.id
        if movement.kind == "deposit" and action == "complete":
            call = partial(t.deposits.complete, key, company_id=company, amount=received)
        elif movement.kind == "deposit":
            call = partial(t.deposits.fail, key, company_id=company)
        elif movement.kind == "withdrawal" and action == "complete":
            call = partial(t.withdrawals.complete, key, company_id=company)
        elif movement.kind == "withdrawal":
            call = partial(t.withdrawals.fail, key, company_id=company)
        elif action == "complete":
            call = partial(t.transfers.complete, key, company_id=company)
        else:
            call = partial(t.transfers.fail, key, company_id=company)
        what = f"{action} {movement.kind} {movement.id} (received {received}, company {company})"
        record = self._attempt(what, call, expected, must_refuse=must_refuse)
        if record is None:
            return
        status = "completed" if action == "complete" else "failed"
        announced = movement.fields.get("from_amount")
        self.model.settle(
            movement.id, status, received if received not in (None, announced) else None
        )
        _check_fields(record, movement.fields)

    def _converts_to_nothing(
        self, movement: ModelMovement, action: str, received: int | None
    ) -> bool:
        """A deposit completed with another sum than announced, too small to credit anything
        in the wallet's currency at the deposit's rate (decisions.md: refused, nothing moves)."""
        if movement.kind != "deposit" or action != "complete" or received is None:
            return False
        if received == movement.fields.get("from_amount"):
            return False
        wallet = self.model.wallets[movement.legs[0][0]]
        source = str(movement.fields["from_currency_id"])
        return self.model.convert(received, source, wallet.currency, movement.rate) <= 0

    def _advance(self, seconds: int) -> None:
        self.model.advance(seconds)
        now = self._call(f"advance {seconds} s", lambda: self.treasury.sandbox.advance(seconds))
        assert now == self.model.now, f"advance({seconds}) answered {now}, model {self.model.now}"

    # Helpers ------------------------------------------------------------------------------------

    def _quoted_usd_rates(self) -> dict[str, Decimal]:
        """One US dollar in each currency the treasury knows, as the configured FX adapter quotes.

        Every one: the rules also draw currencies outside the pool (a virtual account's, a bank
        account's) on purpose.
        """
        fx = self.treasury.context.fx
        rates: dict[str, Decimal] = {}
        known = {currency.code for currency in self.treasury.currencies}
        for code in sorted({"USD", *known, *self.currency_pool, *self.extra_bank_currencies}):
            try:
                rates[code] = self.loop.run_until_complete(fx.rate("USD", code)).rate
            except TreasuryError:
                continue  # a currency the adapter does not quote: the run refuses it too
        return rates

    def _call(self, what: str, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run a service call the model accepts; a refusal fails the test."""
        try:
            return self.loop.run_until_complete(call())
        except TreasuryError as error:
            raise AssertionError(f"{what} was refused with {error!r}; the model accepts it") from (
                error
            )

    def _attempt(
        self,
        what: str,
        call: Callable[[], Coroutine[Any, Any, T]],
        expected: Refusal | None,
        *,
        must_refuse: bool = False,
    ) -> T | None:
        """Run a service call; it must be refused exactly when (and how) the model says.

        Returns the result when accepted, ``None`` when (correctly) refused. After a refusal the
        stored state must be unchanged (invariant 8).
        """
        assert expected is not None or not must_refuse, (
            f"the machine built {what} to be refused, but the model accepts it"
        )
        if expected is None:
            return self._call(what, call)
        before = self._state()
        try:
            result = self.loop.run_until_complete(call())
        except TreasuryError as error:
            refusal = error
        else:
            raise AssertionError(f"{what} was accepted ({result!r}); the model expects {expected}")
        kind, code = expected
        assert isinstance(refusal, kind), f"{what} was refused with {refusal!r}, not {expected}"
        assert refusal.code == code, f"{what} was refused with {refusal!r}, not {expected}"
        _assert_unchanged(before, self._state(), what)
        return None

    def _state(self) -> tuple[LedgerSnapshot, tuple[object, ...]]:
        """Everything a refused operation must leave alone: ledger, records, events, jobs."""
        ledger = read_ledger(self.storage)
        companies = list(self.model.companies)
        horizon = self.model.now + timedelta(days=3650)

        def read(uow: UnitOfWork) -> tuple[object, ...]:
            return (
                [
                    uow.records.list(kind, company, 10_000, None)
                    for kind in _RECORD_KINDS
                    for company in companies
                ],
                [uow.wallets.list(c, 10_000, None) for c in companies],
                uow.outbox.list(None),
                uow.jobs.due(horizon, 10_000),
            )

        return ledger, self.storage.run_sync(read, write=False, snapshot=True)

    def _draw_movement(self, data: st.DataObject, ids: list[str]) -> ModelMovement:
        return self.model.movements[data.draw(st.sampled_from(ids))]

    def _draw_transfer(self, data: st.DataObject, cross: bool) -> None:
        source, target = data.draw(self._funded_first(self._transfer_pairs(cross=cross)))
        amount = data.draw(self._spend_amounts(self.model.account(source).available))
        company = self.model.wallets[source].company_id
        self._transfer(company, source, target, amount, must_refuse=False)

    def _spend_amounts(self, largest: int) -> st.SearchStrategy[int]:
        """Mostly affordable (``largest`` is the most the wallet can pay); edges; anything."""
        edges = [a for a in (largest, largest + 1) if a >= 1]
        options = [st.sampled_from(edges), amounts(self.max_amount)]
        if largest >= 1:
            affordable = st.integers(min_value=1, max_value=largest)
            options = [affordable, affordable, *options]
        return st.one_of(options)

    def _funded_first(self, routes: list[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str]]:
        """Routes whose first wallet has money to spend, usually; any route otherwise."""
        funded = [r for r in routes if self.model.account(r[0]).available > 0]
        anywhere = st.sampled_from(routes)
        if not funded:
            return anywhere
        return st.one_of(st.sampled_from(funded), st.sampled_from(funded), anywhere)

    def _transfer_pairs(self, *, cross: bool | None) -> list[tuple[str, str]]:
        """(source, target) wallets of one company: same currency, cross currency, or either."""
        wallets = sorted(self.model.wallets.values(), key=lambda w: w.id)
        return [
            (a.id, b.id)
            for a in wallets
            for b in wallets
            if a.id != b.id
            and a.company_id == b.company_id
            and (cross is None or (a.currency != b.currency) == cross)
        ]

    def _withdrawal_routes(self) -> list[tuple[str, str]]:
        """(wallet, bank account) pairs of one company."""
        return [
            (w.id, b.id)
            for w in sorted(self.model.wallets.values(), key=lambda w: w.id)
            for b in sorted(self.model.bank_accounts.values(), key=lambda b: b.id)
            if w.company_id == b.company_id
        ]

    def _largest_withdrawal(self, wallet_id: str) -> int:
        """The largest amount whose amount plus fee the wallet can pay (0 if none)."""
        wallet = self.model.wallets[wallet_id]
        available = self.model.account(wallet_id).available
        low, high = 0, max(available, 0)  # amount + fee(amount) grows strictly with amount
        while low < high:
            middle = (low + high + 1) // 2
            if middle + self.model.fee(wallet.currency, middle) <= available:
                low = middle
            else:
                high = middle - 1
        return low

    def _other_company(self, company: int) -> int:
        return next(c for c in self.model.companies if c != company)


def _plain(value: object) -> object:
    return value.value if isinstance(value, StrEnum) else value


def _check_fields(record: TreasuryRecord, fields: Mapping[str, object]) -> None:
    """The record shows every expected field (``error`` compared by its code)."""
    for name, want in fields.items():
        have = getattr(record, name)
        if name == "error":
            have = None if have is None else have.code
        assert _plain(have) == want, f"{record.id}: {name} is {have!r}, the model expects {want!r}"


def _assert_unchanged(
    before: tuple[LedgerSnapshot, tuple[object, ...]],
    after: tuple[LedgerSnapshot, tuple[object, ...]],
    what: str,
) -> None:
    """Invariant 8, allowing only new, untouched system accounts."""
    (ledger_before, rest_before), (ledger_after, rest_after) = before, after
    assert ledger_after.postings == ledger_before.postings, f"refused {what} wrote postings"
    assert ledger_after.pendings == ledger_before.pendings, f"refused {what} changed reservations"
    old = {a.id: a for a in ledger_before.accounts}
    for account in ledger_after.accounts:
        if account.id in old:
            assert account == old.pop(account.id), f"refused {what} changed account {account.id}"
        else:
            assert _untouched_system_account(account), (
                f"refused {what} left account {account} behind"
            )
    assert not old, f"refused {what} removed accounts {sorted(old)}"
    labels = ("records", "wallets", "events", "jobs")
    for label, was, now in zip(labels, rest_before, rest_after, strict=True):
        assert now == was, f"refused {what} changed the stored {label}: {was!r} -> {now!r}"


def _untouched_system_account(account: Account) -> bool:
    return account.kind in _SYSTEM_KINDS and all(getattr(account, c) == 0 for c in _COUNTERS)


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
