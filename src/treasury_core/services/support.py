"""What the treasury services share: lookups, amount checks, FX quotes, events, system accounts."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from treasury_core.config import TreasuryConfig
from treasury_core.currency import CurrencyRegistry
from treasury_core.errors import FxRateUnavailable, NotFound, ValidationFailed
from treasury_core.money import convert
from treasury_core.movements.ledger import system_accounts
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.events import Event, EventType
from treasury_core.pagination import Page, PageRequest, checked_page, page_of
from treasury_core.ports import BankRail, Clock, FxRates, IdSource, Storage, UnitOfWork
from treasury_core.ports.storage import R
from treasury_core.services.events import EventFactory
from treasury_core.services.movements.safeguarding import open_mirrors
from treasury_core.validation import is_resource_id
from treasury_core.wallets import Wallet

#: Wallet currencies remembered per process (see TreasuryContext.known_currency).
_WALLET_CACHE_MAX = 100_000


@dataclass
class TreasuryContext:
    """The adapters and settings every treasury service needs.

    The bank rail is built on first use: the sandbox rail loads schwifty's registries, and an
    application that never touches bank details should not pay for them.
    """

    config: TreasuryConfig
    currencies: CurrencyRegistry
    storage: Storage
    clock: Clock
    ids: IdSource
    rail_factory: Callable[[], BankRail]
    fx: FxRates
    #: Builds every event the services write (its payload is the interface's projection).
    events: EventFactory

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._rail: BankRail | None = None
        # (company, wallet id) -> currency. A wallet's currency never changes, so a service
        # that must quote before its transaction (a transfer) can skip a read transaction.
        self._wallet_currencies: dict[tuple[int, str], str] = {}

    def known_currency(self, company_id: int, wallet_id: str) -> str | None:
        """The currency of the company's wallet if a committed transaction has read it, else
        ``None``.

        A fact, not a hint: wallets are never deleted and never change company or currency, so
        a transfer between known wallets, or a deposit into one, quotes and moves money without
        reading them again (the ledger still locks each wallet's account and checks its
        currency). Keyed by company, so another company's wallet id is never known and is
        refused by the read, as before.
        """
        return self._wallet_currencies.get((company_id, wallet_id))

    async def wallet_currencies(
        self, company_id: int, wallets: Sequence[tuple[str, str]]
    ) -> list[str]:
        """The currency of each of the company's ``(wallet id, param)`` wallets, in order.

        Remembered ones cost nothing (:meth:`known_currency`); otherwise all of them are read
        in one read transaction, refusing an unknown wallet with :class:`NotFound` naming its
        param, and remembered for next time.
        """
        known = [self.known_currency(company_id, wallet_id) for wallet_id, _ in wallets]
        if all(currency is not None for currency in known):
            return [currency for currency in known if currency is not None]

        def read(uow: UnitOfWork) -> list[Wallet]:
            return [wallet_of(uow, company_id, wallet_id, param) for wallet_id, param in wallets]

        found = await self.storage.run(read, write=False)
        for wallet in found:
            self.saw_wallet(wallet)
        return [wallet.currency for wallet in found]

    def saw_wallet(self, wallet: Wallet) -> None:
        """Remember ``wallet``'s currency (bounded: cleared when it grows past 100,000)."""
        if len(self._wallet_currencies) >= _WALLET_CACHE_MAX:
            self._wallet_currencies.clear()
        self._wallet_currencies[wallet.company_id, wallet.id] = wallet.currency

    @property
    def rail(self) -> BankRail:
        """The bank rail (built on first use)."""
        if self._rail is None:
            with self._lock:
                if self._rail is None:
                    self._rail = self.rail_factory()
        return self._rail

    def open_system_accounts(self) -> None:
        """Create the world, FX and fee accounts of every enabled currency that lacks them,
        and the mirror of every configured treasury bank account
        (:func:`~treasury_core.services.movements.safeguarding.open_mirrors`).

        Done once when the treasury is assembled, so no business operation ever creates an
        account (a refused operation then leaves the ledger exactly as it was).
        """
        accounts = system_accounts(*(c.code for c in self.currencies))

        def ensure(uow: UnitOfWork) -> None:
            for account in accounts:
                uow.ledger.ensure_account(account)

        self.storage.run_sync(ensure)
        open_mirrors(self.storage, self.config, self.currencies, self.clock.now())

    async def read_record(
        self, kind: type[R], company_id: int, record_id: str, noun: str, param: str
    ) -> R:
        """The company's record of ``kind``, or :class:`NotFound` naming ``param``."""
        require_id(record_id, kind.prefix, noun, param)
        found = await self.storage.run(
            lambda uow: uow.records.get(kind, record_id, company_id), write=False
        )
        if found is None:
            raise NotFound(f"No such {noun}: {record_id}", param=param)
        return found

    async def list_records(
        self,
        kind: type[R],
        company_id: int,
        page: PageRequest | None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> Page[R]:
        """A page of the company's records of ``kind``, newest first (with ``metadata``: only
        those whose metadata holds every pair of it)."""
        page = checked_page(page)
        rows = await self.storage.run(
            lambda uow: uow.records.list(
                kind, company_id, page.limit + 1, page.starting_after, metadata=metadata
            ),
            write=False,
        )
        return page_of(rows, page.limit)

    def check_amount(self, amount: int, param: str) -> int:
        """``amount`` if it is within the configured maximum."""
        if amount > self.config.max_amount:
            raise ValidationFailed(
                f"{param} must be at most {self.config.max_amount}",
                param=param,
                code="amount_too_large",
            )
        return amount

    async def quote(self, source: str, target: str, amount: int) -> tuple[Decimal, int]:
        """The rate from ``source`` to ``target`` and ``amount`` converted with it.

        Refuses a rate older than the configured freshness limit (nothing has moved yet).
        """
        rate, converted, _ = await self.dated_quote(source, target, amount)
        return rate, converted

    async def dated_quote(
        self, source: str, target: str, amount: int
    ) -> tuple[Decimal, int, date | None]:
        """As :meth:`quote`, with the business day of the rate when the FX adapter gives one
        (``None`` for the same currency, or a live rate)."""
        if source == target:
            return Decimal(1), amount, None
        quote = await self.fx.rate(source, target)
        max_age = min(self.config.fx_max_age_seconds, self.fx.max_age_seconds)
        if self.clock.now() - quote.as_of > timedelta(seconds=max_age):
            raise FxRateUnavailable(
                f"The exchange rate from {source} to {target} is stale; nothing moved, retry later"
            )
        converted = convert(
            amount, self.currencies.get(source), self.currencies.get(target), quote.rate
        )
        if converted <= 0:
            raise ValidationFailed(
                f"The amount converts to nothing in {target}",
                param="from_amount",
                code="amount_too_small",
            )
        return quote.rate, converted, quote.rate_date

    def new_event(self, type_: EventType, record: TreasuryRecord) -> Event:
        """The event ``type_`` for ``record``, stamped now, not yet written."""
        return self.events.event(type_, record)

    def event(self, uow: UnitOfWork, type_: EventType, record: TreasuryRecord) -> None:
        """Write ``type_`` for ``record`` to the outbox, in the caller's transaction."""
        uow.outbox.add(self.new_event(type_, record))

    def add_announced(self, uow: UnitOfWork, record: TreasuryRecord, type_: EventType) -> None:
        """Store the new ``record`` and its event ``type_``, in the caller's transaction (one
        statement where the storage can: ``RecordRepository.add``)."""
        uow.records.add(record, self.new_event(type_, record))


def wallet_of(uow: UnitOfWork, company_id: int, wallet_id: str, param: str) -> Wallet:
    """The company's wallet, or :class:`NotFound` naming ``param``."""
    wallet = uow.wallets.get(company_id, wallet_id) if is_resource_id(wallet_id, "wal") else None
    if wallet is None:
        raise NotFound(f"No such wallet: {wallet_id}", param=param)
    return wallet


def require_id(value: str, prefix: str, noun: str, param: str) -> None:
    """:class:`NotFound` unless ``value`` has the shape of a ``prefix`` id."""
    if not is_resource_id(value, prefix):
        raise NotFound(
            f"No such {noun}: {value}" if value.isprintable() else f"No such {noun}", param=param
        )
