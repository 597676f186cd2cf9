"""Deposits: money announced as coming in, credited when the bank delivers it."""

from __future__ import annotations

from treasury_core.idempotency import IdempotencyTicket
from treasury_core.ledger import Journal
from treasury_core.metadata import checked_metadata
from treasury_core.movements.ledger import deposit_legs
from treasury_core.movements.records import Deposit, PaymentInstructionRecord
from treasury_core.movements.requests import (
    CreateDepositRequest,
    SandboxCompleteRequest,
    SandboxFailRequest,
)
from treasury_core.movements.states import MovementTrigger, next_status
from treasury_core.ports import Settlement, UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.amount_limits import check_amount
from treasury_core.services.idempotency import finish
from treasury_core.services.movements.fx_quotes import FxQuotes
from treasury_core.services.movements.settlement import settle, settlement_job
from treasury_core.services.record_reads import read_record
from treasury_core.services.wallets import WalletCurrencies


class DepositService:
    """Create, read and settle deposits."""

    def __init__(self, *, adapters: Adapters, quotes: FxQuotes, wallets: WalletCurrencies) -> None:
        self._adapters = adapters
        self._quotes = quotes
        self._wallets = wallets

    async def create(
        self,
        company_id: int,
        request: CreateDepositRequest,
        *,
        idempotency: IdempotencyTicket[Deposit] | None = None,
    ) -> Deposit:
        """A pending deposit with payment instructions; the wallet shows it as ``pending_in``."""
        ctx = self._adapters
        source = ctx.currencies.get(request.from_currency_id, param="from_currency_id").code
        check_amount(request.from_amount, "from_amount", ctx.config.max_amount)
        wallet_id = request.wallet_id
        # A wallet the process has seen needs no read transaction.
        (currency,) = await self._wallets.wallet_currencies(company_id, ((wallet_id, "wallet_id"),))
        rate, to_amount = await self._quotes.quote(source, currency, request.from_amount)
        now = ctx.clock.now()
        deposit_id = ctx.ids.new_id(Deposit.prefix)
        journal = Journal(
            ctx.ids.new_id("jr"),
            deposit_legs(wallet_id, source, request.from_amount, currency, to_amount),
            operation="deposit",
            company_id=company_id,
            source_id=deposit_id,
        )
        # The payer quotes the deposit's id, which the system issued: a statement line settles
        # a deposit only by it, never by the merchant's own reference.
        instructions = ctx.rail.deposit_instructions(source, deposit_id)
        deposit = Deposit(
            id=deposit_id,
            company_id=company_id,
            wallet_id=wallet_id,
            from_amount=request.from_amount,
            from_currency_id=source,
            to_amount=to_amount,
            to_currency_id=currency,
            exchange_rate_from_to=rate,
            reference=request.reference,
            description=request.description,
            metadata=checked_metadata(request.metadata),
            status=next_status(None, MovementTrigger.CREATE),
            payment_instructions=[
                PaymentInstructionRecord(
                    bank_name=i.bank_name,
                    account_name=i.account_name,
                    account_number=i.account_number,
                    routing_number=i.routing_number,
                )
                for i in instructions
            ],
            error=None,
            created_at=now,
            pending_ids=tuple(journal.leg_id(i) for i in range(len(journal.legs))),
        )
        job = settlement_job(ctx, deposit, Settlement.DEPOSIT)

        def create(uow: UnitOfWork) -> Deposit:
            uow.ledger.apply(journal, now)
            uow.records.add(deposit)
            if job is not None:
                uow.jobs.schedule(job)
            return finish(uow, idempotency, deposit)

        return await ctx.storage.run(create)

    async def get(self, company_id: int, deposit_id: str) -> Deposit:
        """The deposit, or ``NotFound``."""
        ctx = self._adapters
        return await read_record(
            ctx.storage, Deposit, company_id, deposit_id, "deposit", "deposit_id"
        )

    async def complete(
        self,
        company_id: int | None,
        deposit_id: str,
        *,
        amount: int | None = None,
        idempotency: IdempotencyTicket[Deposit] | None = None,
    ) -> Deposit:
        """The bank delivered: credit the wallet (with ``amount`` if it differs from expected)."""
        SandboxCompleteRequest(amount=amount)
        if amount is not None:
            check_amount(amount, "amount", self._adapters.config.max_amount)
        return await self._adapters.storage.run(
            settle(
                self._adapters,
                Deposit,
                deposit_id,
                param="deposit_id",
                company_id=company_id,
                received=amount,
                idempotency=idempotency,
            )
        )

    async def fail(
        self,
        company_id: int | None,
        deposit_id: str,
        *,
        code: str = "deposit_failed",
        message: str = "The funds did not arrive",
        idempotency: IdempotencyTicket[Deposit] | None = None,
    ) -> Deposit:
        """The bank gave up: release the expected credit and record why."""
        SandboxFailRequest(code=code, message=message)
        return await self._adapters.storage.run(
            settle(
                self._adapters,
                Deposit,
                deposit_id,
                param="deposit_id",
                company_id=company_id,
                fail=(code, message),
                idempotency=idempotency,
            )
        )
