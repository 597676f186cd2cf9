"""Wallets: creation, lookup, balances and lists; the cache of their currencies."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from treasury_core.currency import CurrencyRegistry
from treasury_core.errors import NotFound
from treasury_core.idempotency import IdempotencyTicket
from treasury_core.ledger import Account, AccountKind, BalanceRecord
from treasury_core.metadata import checked_metadata, merged_metadata
from treasury_core.pagination import Page, PageRequest, checked_page, page_of
from treasury_core.ports import Clock, IdSource, Storage, UnitOfWork
from treasury_core.services.idempotency import finish
from treasury_core.validation import is_resource_id
from treasury_core.wallets import CreateWalletRequest, Wallet, WalletStatus

WALLET_ID_PREFIX = "wal"
T = TypeVar("T")

#: Wallet currencies remembered per process (see WalletCurrencies.known_currency).
_WALLET_CACHE_MAX = 100_000


class WalletCurrencies:
    """The currency of each wallet a committed transaction has read, per process.

    A wallet's currency never changes, so a service that must quote before its transaction
    (a transfer) can skip a read transaction.
    """

    def __init__(self, *, storage: Storage) -> None:
        self._storage = storage
        # (company, wallet id) -> currency.
        self._currencies: dict[tuple[int, str], str] = {}

    def known_currency(self, company_id: int, wallet_id: str) -> str | None:
        """The currency of the company's wallet if a committed transaction has read it, else
        ``None``.

        A fact, not a hint: wallets are never deleted and never change company or currency, so
        a transfer between known wallets, or a deposit into one, quotes and moves money without
        reading them again (the ledger still locks each wallet's account and checks its
        currency). Keyed by company, so another company's wallet id is never known and is
        refused by the read.
        """
        return self._currencies.get((company_id, wallet_id))

    async def wallet_currencies(
        self, company_id: int, wallets: Sequence[tuple[str, str]]
    ) -> builtins.list[str]:
        """The currency of each of the company's ``(wallet id, param)`` wallets, in order.

        Remembered ones cost nothing (:meth:`known_currency`); otherwise all of them are read
        in one read transaction, refusing an unknown wallet with :class:`NotFound` naming its
        param, and remembered for next time.
        """
        known = [self.known_currency(company_id, wallet_id) for wallet_id, _ in wallets]
        if all(currency is not None for currency in known):
            return [currency for currency in known if currency is not None]

        def read(uow: UnitOfWork) -> builtins.list[Wallet]:
            return [wallet_of(uow, company_id, wallet_id, param) for wallet_id, param in wallets]

        found = await self._storage.run(read, write=False)
        for wallet in found:
            self.saw_wallet(wallet)
        return [wallet.currency for wallet in found]

    def saw_wallet(self, wallet: Wallet) -> None:
        """Remember ``wallet``'s currency (bounded: cleared when it grows past 100,000)."""
        if len(self._currencies) >= _WALLET_CACHE_MAX:
            self._currencies.clear()
        self._currencies[wallet.company_id, wallet.id] = wallet.currency


def wallet_of(uow: UnitOfWork, company_id: int, wallet_id: str, param: str) -> Wallet:
    """The company's wallet, or :class:`NotFound` naming ``param``."""
    wallet = uow.wallets.get(company_id, wallet_id) if is_resource_id(wallet_id, "wal") else None
    if wallet is None:
        raise NotFound(f"No such wallet: {wallet_id}", param=param)
    return wallet


class WalletService:
    """A company's wallets and their balances."""

    def __init__(
        self, *, storage: Storage, clock: Clock, ids: IdSource, currencies: CurrencyRegistry
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._ids = ids
        self._currencies = currencies

    async def create(
        self,
        company_id: int,
        request: CreateWalletRequest,
        *,
        idempotency: IdempotencyTicket[Wallet] | None = None,
    ) -> Wallet:
        """Open a wallet and its guarded ledger account in one transaction."""
        currency = self._currencies.get(request.currency_id, param="currency_id")
        wallet = Wallet(
            id=self._ids.new_id(WALLET_ID_PREFIX),
            company_id=company_id,
            name=request.name,
            description=request.description,
            currency=currency.code,
            status=WalletStatus.ACTIVE,
            created_at=self._clock.now(),
            metadata=checked_metadata(request.metadata),
        )
        account = Account(
            id=wallet.id,
            currency=currency.code,
            kind=AccountKind.WALLET,
            company_id=company_id,
            guarded=True,
        )

        def create(uow: UnitOfWork) -> Wallet:
            uow.wallets.add(wallet)
            uow.ledger.open_account(account)
            return finish(uow, idempotency, wallet)

        return await self._storage.run(create)

    async def get(self, company_id: int, wallet_id: str) -> Wallet:
        """The wallet, or :class:`NotFound` (also for another company's wallet)."""
        _require_wallet_id(wallet_id)
        wallet = await self._storage.run(
            lambda uow: uow.wallets.get(company_id, wallet_id), write=False
        )
        if wallet is None:
            raise NotFound(f"No such wallet: {wallet_id}", param="wallet_id")
        return wallet

    async def balance(self, company_id: int, wallet_id: str) -> BalanceRecord:
        """The wallet's balance record: one account row, whatever the history."""
        _require_wallet_id(wallet_id)

        def read(uow: UnitOfWork) -> Account | None:
            account = uow.ledger.get_account(wallet_id)
            if (
                account is None
                or account.company_id != company_id
                or account.kind is not AccountKind.WALLET
            ):
                return None
            return account

        account = await self._storage.run(read, write=False)
        if account is None:
            raise NotFound(f"No such wallet: {wallet_id}", param="wallet_id")
        return BalanceRecord.of(account)

    async def list(
        self,
        company_id: int,
        page: PageRequest | None = None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> Page[Wallet]:
        """A page of the company's wallets, newest first (``metadata``: with its pairs)."""
        page = checked_page(page)
        rows = await self._storage.run(
            lambda uow: uow.wallets.list(
                company_id, page.limit + 1, page.starting_after, metadata=metadata
            ),
            write=False,
        )
        return page_of(rows, page.limit)

    async def update_metadata(
        self,
        company_id: int,
        wallet_id: str,
        metadata: Mapping[str, str],
        *,
        idempotency: IdempotencyTicket[Wallet] | None = None,
    ) -> Wallet:
        """Merge ``metadata`` into the wallet's (``""`` deletes a key); :class:`NotFound` for
        another company's or an unknown wallet."""
        _require_wallet_id(wallet_id)

        def write(uow: UnitOfWork) -> Wallet:
            wallet = uow.wallets.lock(company_id, wallet_id)
            if wallet is None:
                raise NotFound(f"No such wallet: {wallet_id}", param="wallet_id")
            merged = merged_metadata(wallet.metadata, metadata)
            if merged != wallet.metadata:
                uow.wallets.set_metadata(company_id, wallet_id, merged)
                wallet = wallet.model_copy(update={"metadata": merged})
            return finish(uow, idempotency, wallet)

        return await self._storage.run(write)

    async def balances(
        self, company_id: int, page: PageRequest | None = None
    ) -> Page[BalanceRecord]:
        """A page of the company's balance records, newest wallet first, read in one query."""
        page = checked_page(page)
        rows = await self._storage.run(
            lambda uow: uow.ledger.wallet_accounts(company_id, page.limit + 1, page.starting_after),
            write=False,
        )
        result = page_of(rows, page.limit)
        return Page([BalanceRecord.of(a) for a in result.items], result.has_more)

    async def all(
        self, company_id: int, *, metadata: Mapping[str, str] | None = None
    ) -> builtins.list[Wallet]:
        """Every wallet of the company, newest first (``GET /wallets`` without ``limit``: the
        interface promises all of them; ``metadata``: only those holding its pairs). Read in
        batches, in one transaction, so the list is one consistent state."""

        def read(uow: UnitOfWork) -> builtins.list[Wallet]:
            return _all_pages(
                lambda after: uow.wallets.list(company_id, _BATCH, after, metadata=metadata), _id
            )

        return await self._storage.run(read, write=False, snapshot=True)

    async def all_balances(self, company_id: int) -> builtins.list[BalanceRecord]:
        """The balance record of every wallet of the company, newest wallet first."""

        def read(uow: UnitOfWork) -> builtins.list[Account]:
            return _all_pages(
                lambda after: uow.ledger.wallet_accounts(company_id, _BATCH, after), _id
            )

        accounts = await self._storage.run(read, write=False, snapshot=True)
        return [BalanceRecord.of(a) for a in accounts]


#: How many wallets one read of :meth:`WalletService.all` takes.
_BATCH = 500


def _id(item: Wallet | Account) -> str:
    return item.id


def _all_pages(read: Callable[[str | None], list[T]], key: Callable[[T], str]) -> list[T]:
    rows: list[T] = []
    after: str | None = None
    while True:
        batch = read(after)
        rows.extend(batch)
        if len(batch) < _BATCH:
            return rows
        after = key(batch[-1])


def _require_wallet_id(wallet_id: str) -> None:
    if not is_resource_id(wallet_id, WALLET_ID_PREFIX):
        raise NotFound("No such wallet", param="wallet_id")
