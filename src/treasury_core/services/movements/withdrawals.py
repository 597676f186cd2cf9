"""Withdrawals: wallet funds sent to a registered bank account of the same company."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from treasury_core.errors import InsufficientFunds, NotFound, ValidationFailed
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.ledger import Journal
from treasury_core.listing import DELETED
from treasury_core.metadata import checked_metadata
from treasury_core.movements.ledger import FeeRule, withdrawal_legs
from treasury_core.movements.records import BankAccount, Withdrawal
from treasury_core.movements.requests import CreateWithdrawalRequest, SandboxFailRequest
from treasury_core.movements.states import MovementTrigger, next_status
from treasury_core.pagination import Page, PageRequest
from treasury_core.ports import Settlement, UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.amount_limits import check_amount
from treasury_core.services.idempotency import finish
from treasury_core.services.movements.fx_quotes import FxQuotes
from treasury_core.services.movements.settlement import settle, settlement_job
from treasury_core.services.record_reads import list_records, read_record, require_id
from treasury_core.services.wallets import wallet_of
from treasury_core.wallets import Wallet


class WithdrawalService:
    """Create, read, list and settle withdrawals."""

    def __init__(self, *, adapters: Adapters, quotes: FxQuotes) -> None:
        self._adapters = adapters
        self._quotes = quotes

    async def create(
        self,
        company_id: int,
        request: CreateWithdrawalRequest,
        *,
        idempotency: IdempotencyTicket[Withdrawal] | None = None,
    ) -> Withdrawal:
        """Reserve amount and fee (``pending_out``) and start paying out; refused whole if short."""
        ctx = self._adapters
        source = ctx.currencies.get(request.from_currency_id, param="from_currency_id").code
        if request.to_currency_id is not None:
            ctx.currencies.get(request.to_currency_id, param="to_currency_id")
        check_amount(request.from_amount, "from_amount", ctx.config.max_amount)
        require_id(request.bank_account_id, BankAccount.prefix, "bank account", "bank_account_id")

        def read(uow: UnitOfWork) -> tuple[Wallet, BankAccount | None]:
            wallet = wallet_of(uow, company_id, request.wallet_id, "wallet_id")
            return wallet, uow.records.get(BankAccount, request.bank_account_id, company_id)

        wallet, bank = await ctx.storage.run(read, write=False)
        if bank is None or bank.status == DELETED:
            raise NotFound(
                f"No such bank account: {request.bank_account_id}", param="bank_account_id"
            )
        if source != wallet.currency:
            raise ValidationFailed(
                f"from_currency_id must be the wallet's currency, {wallet.currency}",
                param="from_currency_id",
                code="currency_mismatch",
            )
        target = request.to_currency_id or bank.currency_id
        if target != bank.currency_id:
            raise ValidationFailed(
                f"to_currency_id must be the bank account's currency, {bank.currency_id}",
                param="to_currency_id",
                code="currency_mismatch",
            )
        rate, to_amount = await self._quotes.quote(source, target, request.from_amount)
        fee = FeeRule(*ctx.config.withdrawal_fee(source)).fee(request.from_amount)
        now = ctx.clock.now()
        journal = Journal(
            ctx.ids.new_id("jr"),
            withdrawal_legs(wallet.id, source, request.from_amount, fee, target, to_amount),
            operation="withdrawal",
            company_id=company_id,
        )
        withdrawal = Withdrawal(
            id=ctx.ids.new_id(Withdrawal.prefix),
            company_id=company_id,
            wallet_id=wallet.id,
            from_amount=request.from_amount,
            from_currency_id=source,
            to_amount=to_amount,
            to_currency_id=target,
            exchange_rate_from_to=rate,
            bank_account_id=bank.id,
            reference=request.reference,
            description=request.description,
            metadata=checked_metadata(request.metadata),
            withdraw_fee=fee,
            status=next_status(None, MovementTrigger.CREATE),
            error=None,
            created_at=now,
            pending_ids=tuple(journal.leg_id(i) for i in range(len(journal.legs))),
        )
        job = settlement_job(ctx, withdrawal, Settlement.WITHDRAWAL)

        # The withdrawal's id is made after the journal's (ids sort by creation); it is the
        # source of the wallet transactions the journal writes.
        journal = replace(journal, source_id=withdrawal.id)

        def create(uow: UnitOfWork) -> Withdrawal:
            # Locked as deleting it locks it (services/records.py): a bank account deleted
            # since the read above takes no new withdrawal.
            current = uow.records.get(BankAccount, bank.id, company_id, for_update=True)
            if current is None or current.status == DELETED:
                raise NotFound(
                    f"No such bank account: {request.bank_account_id}", param="bank_account_id"
                )
            try:
                uow.ledger.apply(journal, now)
            except InsufficientFunds as exc:
                raise InsufficientFunds(
                    "Insufficient funds: the wallet's available balance does not cover the amount "
                    "and the fee",
                    param="from_amount",
                ) from exc
            uow.records.add(withdrawal)
            if job is not None:
                uow.jobs.schedule(job)
            return finish(uow, idempotency, withdrawal)

        return await ctx.storage.run(create)

    async def get(self, company_id: int, withdrawal_id: str) -> Withdrawal:
        """The withdrawal, or ``NotFound``."""
        return await read_record(
            self._adapters.storage,
            Withdrawal,
            company_id,
            withdrawal_id,
            "withdrawal",
            "withdraw_id",
        )

    async def list(
        self,
        company_id: int,
        page: PageRequest | None = None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> Page[Withdrawal]:
        """The company's withdrawals, newest first (``metadata``: only those holding its pairs)."""
        return await list_records(
            self._adapters.storage, Withdrawal, company_id, page, metadata=metadata
        )

    async def complete(
        self,
        company_id: int | None,
        withdraw_id: str,
        *,
        idempotency: IdempotencyTicket[Withdrawal] | None = None,
    ) -> Withdrawal:
        """The bank paid out: post the amount and the fee."""
        return await self._adapters.storage.run(
            settle(
                self._adapters,
                Withdrawal,
                withdraw_id,
                param="withdraw_id",
                company_id=company_id,
                idempotency=idempotency,
            )
        )

    async def fail(
        self,
        company_id: int | None,
        withdraw_id: str,
        *,
        code: str = "withdrawal_failed",
        message: str = "The bank rejected the payout",
        idempotency: IdempotencyTicket[Withdrawal] | None = None,
    ) -> Withdrawal:
        """The payout failed: release amount and fee back to the wallet and record why."""
        SandboxFailRequest(code=code, message=message)
        return await self._adapters.storage.run(
            settle(
                self._adapters,
                Withdrawal,
                withdraw_id,
                param="withdraw_id",
                company_id=company_id,
                fail=(code, message),
                idempotency=idempotency,
            )
        )
