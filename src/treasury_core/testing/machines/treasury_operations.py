"""The wiring and operations of :class:`~treasury_core.testing.machines.treasury.TreasuryMachine`.

:class:`TreasuryOperations` opens the run's storage and treasury and holds the operations the
machine's rules call: each predicts the outcome with the
:class:`~treasury_core.testing.machines.treasury_model.ReferenceTreasury`, calls the service,
compares
and commits the model. The rules, the invariants and the public entry points are in
:mod:`treasury_core.testing.machines.treasury`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from datetime import timedelta
from decimal import Decimal
from functools import partial
from typing import Any, ClassVar, TypeVar

from hypothesis import strategies as st

from treasury_core.bootstrap import Treasury, bootstrap
from treasury_core.config import TreasuryConfig
from treasury_core.errors import (
    TreasuryError,
)
from treasury_core.ledger.invariants import (
    LedgerSnapshot,
    read_ledger,
)
from treasury_core.movements.ledger import fee_account
from treasury_core.movements.records import (
    TreasuryRecord,
)
from treasury_core.movements.requests import (
    CreateDepositRequest,
    CreateTransferRequest,
    CreateVirtualAccountRequest,
    CreateWithdrawalRequest,
    RegisterBankAccountRequest,
)
from treasury_core.ports.storage import UnitOfWork
from treasury_core.testing.machines.base import ServiceMachine
from treasury_core.testing.machines.treasury_model import (
    INSUFFICIENT,
    MISMATCH,
    NO_VIRTUAL_ACCOUNT,
    NOT_FOUND,
    NOT_PENDING,
    RECORD_KINDS,
    SAME_WALLET,
    TOO_LARGE,
    TOO_SMALL,
    Legs,
    ModelBankAccount,
    ModelMovement,
    ModelVirtualAccount,
    ModelWallet,
    ReferenceTreasury,
    Refusal,
    assert_unchanged,
    check_fields,
)
from treasury_core.testing.strategies import amounts
from treasury_core.wallets import CreateWalletRequest

T = TypeVar("T")


class TreasuryOperations(ServiceMachine):
    """The storage, treasury and model of one run, and the operations rules are built from."""

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
        check_fields(deposit, fields)
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
        check_fields(withdrawal, fields)
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
        check_fields(transfer, fields)
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
                else service.incoming(None, account_id, amount, "incoming")
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
        check_fields(deposit, fields)
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
            call = partial(t.deposits.complete, company, key, amount=received)
        elif movement.kind == "deposit":
            call = partial(t.deposits.fail, company, key)
        elif movement.kind == "withdrawal" and action == "complete":
            call = partial(t.withdrawals.complete, company, key)
        elif movement.kind == "withdrawal":
            call = partial(t.withdrawals.fail, company, key)
        elif action == "complete":
            call = partial(t.transfers.complete, company, key)
        else:
            call = partial(t.transfers.fail, company, key)
        what = f"{action} {movement.kind} {movement.id} (received {received}, company {company})"
        record = self._attempt(what, call, expected, must_refuse=must_refuse)
        if record is None:
            return
        status = "completed" if action == "complete" else "failed"
        announced = movement.fields.get("from_amount")
        self.model.settle(
            movement.id, status, received if received not in (None, announced) else None
        )
        check_fields(record, movement.fields)

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
        fx = self.treasury.adapters.fx
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
        assert_unchanged(before, self._state(), what)
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
                    for kind in RECORD_KINDS
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
