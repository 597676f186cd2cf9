"""Bank accounts (withdrawal destinations) and virtual accounts (dedicated incoming details)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from decimal import Decimal

from treasury_core.errors import ConflictRetryExhausted, NotFound, ValidationFailed
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.ledger import Journal
from treasury_core.metadata import checked_metadata
from treasury_core.movements.ledger import completed_deposit_legs
from treasury_core.movements.records import BankAccount, Deposit, VirtualAccount
from treasury_core.movements.requests import (
    CreateVirtualAccountRequest,
    RegisterBankAccountRequest,
    SandboxIncomingRequest,
)
from treasury_core.movements.states import MovementTrigger, next_status
from treasury_core.notifications.events import EventType
from treasury_core.pagination import Page, PageRequest
from treasury_core.ports import AccountFormat, BankAccountDetails, UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.amount_limits import check_amount
from treasury_core.services.idempotency import finish
from treasury_core.services.movements.fx_quotes import FxQuotes
from treasury_core.services.record_reads import list_records, read_record, require_id
from treasury_core.services.wallets import wallet_of
from treasury_core.wallets import Wallet

_MAX_DRAWS = 20


class BankAccountService:
    """Register and read withdrawal destinations, validated by the bank rail's formats."""

    def __init__(self, *, adapters: Adapters) -> None:
        self._adapters = adapters

    async def register(
        self,
        company_id: int,
        request: RegisterBankAccountRequest,
        *,
        idempotency: IdempotencyTicket[BankAccount] | None = None,
    ) -> BankAccount:
        """Check the details against their currency's format and checksums, then store them."""
        ctx = self._adapters
        currency = ctx.currencies.get(request.currency_id, param="currency_id").code
        checked_metadata(request.metadata)  # before the rail's checks: one error per field
        details = ctx.rail.validate_bank_account(
            BankAccountDetails(
                bank_name=request.bank_name,
                account_name=request.account_name,
                account_number=request.account_number,
                routing_number=request.routing_number,
                currency=currency,
            )
        )
        account = BankAccount(
            id=ctx.ids.new_id(BankAccount.prefix),
            company_id=company_id,
            bank_name=details.bank_name,
            account_name=details.account_name,
            account_number=details.account_number,
            routing_number=details.routing_number,
            currency_id=currency,
            created_at=ctx.clock.now(),
            metadata=checked_metadata(request.metadata),
        )

        def register(uow: UnitOfWork) -> BankAccount:
            uow.records.add(account)
            return finish(uow, idempotency, account)

        return await ctx.storage.run(register)

    async def get(self, company_id: int, bank_account_id: str) -> BankAccount:
        """The bank account, or ``NotFound``."""
        return await read_record(
            self._adapters.storage,
            BankAccount,
            company_id,
            bank_account_id,
            "bank account",
            "bank_account_id",
        )

    async def list(
        self,
        company_id: int,
        page: PageRequest | None = None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> Page[BankAccount]:
        """The company's bank accounts, newest first (``metadata``: those holding its pairs)."""
        return await list_records(
            self._adapters.storage, BankAccount, company_id, page, metadata=metadata
        )

    def formats(self) -> builtins.list[AccountFormat]:
        """The formats of the enabled currencies."""
        return [
            f
            for f in self._adapters.rail.account_formats()
            if f.currency in self._adapters.currencies
        ]

    def bank_names(self, currency: str | None = None) -> builtins.list[str]:
        """Known bank names, for one enabled currency or all."""
        if currency is not None:
            currency = self._adapters.currencies.get(currency, param="currency").code
        return self._adapters.rail.bank_names(currency)


class VirtualAccountService:
    """Virtual accounts and the money that arrives through them."""

    def __init__(self, *, adapters: Adapters, quotes: FxQuotes) -> None:
        self._adapters = adapters
        self._quotes = quotes

    async def create(
        self,
        company_id: int,
        request: CreateVirtualAccountRequest,
        *,
        idempotency: IdempotencyTicket[VirtualAccount] | None = None,
    ) -> VirtualAccount:
        """Dedicated bank details for a wallet, where the currency has ``can_vban``."""
        ctx = self._adapters
        currency = ctx.currencies.get(request.source_currency, param="source_currency")
        if not currency.can_vban:
            raise ValidationFailed(
                f"Virtual accounts are not offered for {currency.code}",
                param="source_currency",
                code="virtual_account_unavailable",
            )
        metadata = checked_metadata(request.metadata)
        wallet = await ctx.storage.run(
            lambda uow: wallet_of(uow, company_id, request.wallet_id, "wallet_id"), write=False
        )
        return await ctx.storage.run(
            lambda uow: self._create_in(
                uow, company_id, wallet, currency.code, idempotency, metadata
            )
        )

    def _create_in(
        self,
        uow: UnitOfWork,
        company_id: int,
        wallet: Wallet,
        currency: str,
        idempotency: IdempotencyTicket[VirtualAccount] | None,
        metadata: dict[str, str] | None = None,
    ) -> VirtualAccount:
        ctx = self._adapters
        # Details derive from the id; short local numbers (8-digit GBP) can collide, so draw
        # again until they are free. Incoming funds are routed by these numbers.
        for _ in range(_MAX_DRAWS):
            account_id = ctx.ids.new_id(VirtualAccount.prefix)
            details = ctx.rail.virtual_account_details(currency, account_id)
            key = details.iban or details.account_number
            if key is None or uow.records.find(VirtualAccount, key) is None:
                break
        else:  # pragma: no cover - needs _MAX_DRAWS collisions in a row
            raise ConflictRetryExhausted("Could not allocate free virtual account details")
        account = VirtualAccount(
            id=account_id,
            company_id=company_id,
            wallet_id=wallet.id,
            source_currency=currency,
            status="active",
            account_name=details.account_name,
            bank_name=details.bank_name,
            account_number=details.account_number,
            routing_number=details.routing_number,
            iban=details.iban,
            bic=details.bic,
            swift_code=details.bic,
            sort_code=details.sort_code,
            branch_code=details.branch_code,
            created_at=ctx.clock.now(),
            metadata=metadata or {},
        )

        uow.records.add(account)
        return finish(uow, idempotency, account)

    async def get(self, company_id: int, account_id: str) -> VirtualAccount:
        """The virtual account, or ``NotFound``."""
        return await read_record(
            self._adapters.storage,
            VirtualAccount,
            company_id,
            account_id,
            "virtual account",
            "virtual_account_id",
        )

    async def list(
        self,
        company_id: int,
        page: PageRequest | None = None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> Page[VirtualAccount]:
        """The company's virtual accounts, newest first (``metadata``: with its pairs)."""
        return await list_records(
            self._adapters.storage, VirtualAccount, company_id, page, metadata=metadata
        )

    async def incoming(
        self,
        company_id: int | None,
        account_id: str,
        amount: int,
        reference: str | None = None,
        *,
        idempotency: IdempotencyTicket[Deposit] | None = None,
    ) -> Deposit:
        """Funds arrived at a virtual account: a completed deposit credits its wallet at once."""
        SandboxIncomingRequest(amount=amount, reference=reference)
        require_id(account_id, VirtualAccount.prefix, "virtual account", "virtual_account_id")
        return await self._credit(
            lambda uow: uow.records.get(VirtualAccount, account_id, company_id),
            account_id,
            amount,
            reference,
            idempotency,
        )

    async def credit_by_details(
        self, account_key: str, currency: str, amount: int, reference: str | None = None
    ) -> Deposit:
        """The rail reports funds sent to an IBAN or account number: credit its virtual account."""
        currency = self._adapters.currencies.get(currency, param="currency").code

        def find(uow: UnitOfWork) -> VirtualAccount | None:
            account = uow.records.find(VirtualAccount, account_key)
            return account if account is not None and account.source_currency == currency else None

        return await self._credit(find, account_key, amount, reference)

    async def _credit(
        self,
        find: Callable[[UnitOfWork], VirtualAccount | None],
        key: str,
        amount: int,
        reference: str | None,
        idempotency: IdempotencyTicket[Deposit] | None = None,
    ) -> Deposit:
        ctx = self._adapters
        check_amount(amount, "amount", ctx.config.max_amount)

        def read(uow: UnitOfWork) -> tuple[VirtualAccount, Wallet]:
            account = find(uow)
            if account is None:
                raise NotFound(f"No such virtual account: {key}", param="virtual_account_id")
            return account, wallet_of(uow, account.company_id, account.wallet_id, "wallet_id")

        account, wallet = await ctx.storage.run(read, write=False)
        rate, to_amount = await self._quotes.quote(account.source_currency, wallet.currency, amount)
        deposit, journal = virtual_account_credit(
            ctx, account, wallet, amount, reference, rate, to_amount
        )

        def credit(uow: UnitOfWork) -> Deposit:
            apply_completed_credit(uow, ctx, deposit, journal)
            return finish(uow, idempotency, deposit)

        return await ctx.storage.run(credit)


def virtual_account_credit(
    ctx: Adapters,
    account: VirtualAccount,
    wallet: Wallet,
    amount: int,
    reference: str | None,
    rate: Decimal,
    to_amount: int,
) -> tuple[Deposit, Journal]:
    """The completed deposit and its journal for ``amount`` received at ``account``, quoted
    into the wallet's currency (``rate``, ``to_amount``); built before the transaction, which
    may be re-run, so its ids stay the same."""
    return completed_credit(
        ctx,
        wallet,
        (amount, account.source_currency),
        (rate, to_amount),
        reference=reference,
        description=f"Received at virtual account {account.id}",
        operation="virtual_account_credit",
        virtual_account_id=account.id,
    )


def completed_credit(
    ctx: Adapters,
    wallet: Wallet,
    received: tuple[int, str],
    quote: tuple[Decimal, int],
    *,
    reference: str | None,
    description: str,
    operation: str,
    virtual_account_id: str | None = None,
) -> tuple[Deposit, Journal]:
    """A completed deposit into ``wallet`` of money that arrived (``received``: amount and
    currency), quoted into the wallet's currency (``quote``: rate and amount), and its journal:
    the one shape of money that reached the bank for a wallet, built before the transaction."""
    amount, currency = received
    rate, to_amount = quote
    deposit = Deposit(
        id=ctx.ids.new_id(Deposit.prefix),
        company_id=wallet.company_id,
        wallet_id=wallet.id,
        from_amount=amount,
        from_currency_id=currency,
        to_amount=to_amount,
        to_currency_id=wallet.currency,
        exchange_rate_from_to=rate,
        reference=reference,
        description=description,
        status=next_status(None, MovementTrigger.CREATE_SETTLED),
        payment_instructions=[],
        error=None,
        created_at=ctx.clock.now(),
        virtual_account_id=virtual_account_id,
    )
    journal = Journal(
        ctx.ids.new_id("jr"),
        completed_deposit_legs(wallet.id, currency, amount, wallet.currency, to_amount),
        operation=operation,
        company_id=wallet.company_id,
        source_id=deposit.id,
    )
    return deposit, journal


def apply_completed_credit(
    uow: UnitOfWork, ctx: Adapters, deposit: Deposit, journal: Journal
) -> None:
    """Post the credit, store the deposit and write ``treasury.deposit.completed``, in ``uow``
    (the sandbox control's transaction, or a statement import's)."""
    uow.ledger.apply(journal, deposit.created_at)
    ctx.events.add_announced(uow, deposit, EventType.DEPOSIT_COMPLETED)
