"""Transfers between wallets of one company, converted through FX liquidity across currencies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from treasury_core.errors import InsufficientFunds, ValidationFailed
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.ledger import Journal
from treasury_core.metadata import checked_metadata
from treasury_core.movements.ledger import transfer_legs
from treasury_core.movements.records import Transfer
from treasury_core.movements.requests import CreateTransferRequest, SandboxFailRequest
from treasury_core.movements.states import MovementTrigger, next_status
from treasury_core.notifications.events import EventType
from treasury_core.pagination import Page, PageRequest
from treasury_core.ports import Settlement, UnitOfWork
from treasury_core.services.adapters import Adapters
from treasury_core.services.amount_limits import check_amount
from treasury_core.services.idempotency import finish
from treasury_core.services.movements.fx_quotes import FxQuotes
from treasury_core.services.movements.settlement import settle, settlement_job
from treasury_core.services.record_reads import list_records, read_record
from treasury_core.services.wallets import WalletCurrencies

# The two ways a transfer starts (looked up once: the table is fixed).
_CREATED_PENDING = next_status(None, MovementTrigger.CREATE)
_CREATED_SETTLED = next_status(None, MovementTrigger.CREATE_SETTLED)


class TransferService:
    """Create, read, list and settle transfers."""

    def __init__(self, *, adapters: Adapters, quotes: FxQuotes, wallets: WalletCurrencies) -> None:
        self._adapters = adapters
        self._quotes = quotes
        self._wallets = wallets

    async def create(
        self,
        company_id: int,
        request: CreateTransferRequest,
        *,
        idempotency: IdempotencyTicket[Transfer] | None = None,
    ) -> Transfer:
        """Same currency: completed at once. Cross currency: reserved until the rail confirms."""
        ctx = self._adapters
        check_amount(request.from_amount, "from_amount", ctx.config.max_amount)
        if request.from_wallet_id == request.to_wallet_id:
            raise ValidationFailed(
                "from_wallet_id and to_wallet_id must be different wallets",
                param="to_wallet_id",
                code="same_wallet",
            )
        metadata = checked_metadata(request.metadata)

        # A wallet's currency never changes: once both have been seen, a transfer is one
        # transaction; the first transfer of a wallet reads it first.
        from_currency, to_currency = await self._wallets.wallet_currencies(
            company_id,
            ((request.from_wallet_id, "from_wallet_id"), (request.to_wallet_id, "to_wallet_id")),
        )
        rate, to_amount, rate_date = await self._quotes.dated_quote(
            from_currency, to_currency, request.from_amount
        )
        cross = from_currency != to_currency

        # Both wallets are known to be the company's, in these currencies: read by a committed
        # transaction (``wallet_currencies``), and a wallet is never deleted and never changes
        # company or currency. So the write transaction does not read them again; the ledger
        # still locks each wallet's account and refuses one whose currency is not the journal's.
        source_id, target_id = request.from_wallet_id, request.to_wallet_id

        def create(uow: UnitOfWork) -> Transfer:
            now = ctx.clock.now()
            journal = Journal(
                ctx.ids.new_id("jr"),
                transfer_legs(
                    source_id,
                    from_currency,
                    request.from_amount,
                    target_id,
                    to_currency,
                    to_amount,
                ),
                operation="transfer",
                company_id=company_id,
            )
            transfer = Transfer(
                id=ctx.ids.new_id(Transfer.prefix),
                company_id=company_id,
                from_wallet_id=source_id,
                to_wallet_id=target_id,
                from_amount=request.from_amount,
                from_currency_id=from_currency,
                to_amount=to_amount,
                to_currency_id=to_currency,
                exchange_rate_from_to=rate,
                exchange_rate_date=rate_date,
                reference=request.reference,
                description=request.description,
                metadata=metadata,
                status=_CREATED_PENDING if cross else _CREATED_SETTLED,
                error=None,
                created_at=now,
                pending_ids=(
                    tuple(journal.leg_id(i) for i in range(len(journal.legs))) if cross else ()
                ),
            )
            try:
                uow.ledger.apply(replace(journal, source_id=transfer.id), now)
            except InsufficientFunds as exc:
                raise InsufficientFunds(
                    "Insufficient funds: the source wallet's available balance does not cover "
                    "the amount",
                    param="from_amount",
                ) from exc
            if not cross:
                ctx.events.add_announced(uow, transfer, EventType.TRANSFER_COMPLETED)
            else:
                uow.records.add(transfer)
                job = settlement_job(ctx, transfer, Settlement.FX_TRANSFER)
                if job is not None:
                    uow.jobs.schedule(job)
            return finish(uow, idempotency, transfer)

        return await ctx.storage.run(create)

    async def get(self, company_id: int, transfer_id: str) -> Transfer:
        """The transfer, or ``NotFound``."""
        return await read_record(
            self._adapters.storage, Transfer, company_id, transfer_id, "transfer", "transfer_id"
        )

    async def list(
        self,
        company_id: int,
        page: PageRequest | None = None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> Page[Transfer]:
        """The company's transfers, newest first (``metadata``: only those holding its pairs)."""
        return await list_records(
            self._adapters.storage, Transfer, company_id, page, metadata=metadata
        )

    async def complete(
        self,
        company_id: int | None,
        transfer_id: str,
        *,
        idempotency: IdempotencyTicket[Transfer] | None = None,
    ) -> Transfer:
        """The conversion settled: post both legs."""
        return await self._adapters.storage.run(
            settle(
                self._adapters,
                Transfer,
                transfer_id,
                param="transfer_id",
                company_id=company_id,
                idempotency=idempotency,
            )
        )

    async def fail(
        self,
        company_id: int | None,
        transfer_id: str,
        *,
        code: str = "transfer_failed",
        message: str = "The currency conversion did not settle",
        idempotency: IdempotencyTicket[Transfer] | None = None,
    ) -> Transfer:
        """The conversion failed: return the funds to the source wallet and record why."""
        SandboxFailRequest(code=code, message=message)
        return await self._adapters.storage.run(
            settle(
                self._adapters,
                Transfer,
                transfer_id,
                param="transfer_id",
                company_id=company_id,
                fail=(code, message),
                idempotency=idempotency,
            )
        )
