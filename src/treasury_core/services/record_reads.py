"""Reading records: the one path every service reads a company's records by.

:func:`read_record` and :func:`list_records` are the reads the services share;
:class:`RecordService` reads every kind the interface serves, deletes a bank account and
forgets a saved card. Reads through it never return a deleted record: a deleted bank account or
saved card is a tombstone kept for the records that name it (a withdrawal's
``bank_account_id``, an intent's ``card_token``), not data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from treasury_core.cards.tokens import PaymentMethodToken
from treasury_core.errors import InvalidRequestError, NotFound, ValidationFailed
from treasury_core.listing import DELETED, RecordFilter, checked_filter
from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    MovementStatus,
    TreasuryRecord,
    VirtualAccount,
    Withdrawal,
)
from treasury_core.pagination import Page, PageRequest, checked_page, page_of
from treasury_core.payments.records import Chargeback, Payout, Refund, Transaction
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.validation import is_resource_id

R = TypeVar("R", bound=TreasuryRecord)

#: How each readable kind is named in errors: the noun and the path parameter.
NAMES: dict[type[TreasuryRecord], tuple[str, str]] = {
    Deposit: ("deposit", "deposit_id"),
    BankAccount: ("bank account", "bank_account_id"),
    VirtualAccount: ("virtual account", "virtual_account_id"),
    Refund: ("refund", "refund_id"),
    Chargeback: ("chargeback", "chargeback_id"),
    Payout: ("payout", "payout_id"),
    PaymentMethodToken: ("payment method token", "token_id"),
    # A payment attempt, read by id (an intent's ``latest_transaction_id``; the dashboard).
    Transaction: ("transaction", "transaction_id"),
}


def require_id(value: str, prefix: str, noun: str, param: str) -> None:
    """:class:`NotFound` unless ``value`` has the shape of a ``prefix`` id."""
    if not is_resource_id(value, prefix):
        raise NotFound(
            f"No such {noun}: {value}" if value.isprintable() else f"No such {noun}", param=param
        )


async def read_record(
    storage: Storage, kind: type[R], company_id: int, record_id: str, noun: str, param: str
) -> R:
    """The company's record of ``kind``, or :class:`NotFound` naming ``param``."""
    require_id(record_id, kind.prefix, noun, param)
    found = await storage.run(lambda uow: uow.records.get(kind, record_id, company_id), write=False)
    if found is None:
        raise NotFound(f"No such {noun}: {record_id}", param=param)
    return found


async def list_records(
    storage: Storage,
    kind: type[R],
    company_id: int,
    page: PageRequest | None,
    *,
    metadata: Mapping[str, str] | None = None,
) -> Page[R]:
    """A page of the company's records of ``kind``, newest first (with ``metadata``: only
    those whose metadata holds every pair of it)."""
    page = checked_page(page)
    rows = await storage.run(
        lambda uow: uow.records.list(
            kind, company_id, page.limit + 1, page.starting_after, metadata=metadata
        ),
        write=False,
    )
    return page_of(rows, page.limit)


class BankAccountInUse(InvalidRequestError):
    """A pending withdrawal still pays out to the bank account."""

    default_code = "bank_account_in_use"


class RecordService:
    """Read any of a company's records; delete a bank account; forget a saved card."""

    def __init__(self, *, storage: Storage) -> None:
        self._storage = storage

    async def get(self, kind: type[R], company_id: int, record_id: str) -> R:
        """The company's record, or :class:`NotFound` (also once deleted); a kind it does not
        read is :class:`ValidationFailed` naming the kinds it reads."""
        names = NAMES.get(kind)
        if names is None:
            read = ", ".join(k.__name__ for k in NAMES)
            name = getattr(kind, "__name__", repr(kind))
            raise ValidationFailed(f"records.get reads {read}; not {name}", param="kind")
        noun, param = names
        found = await read_record(self._storage, kind, company_id, record_id, noun, param)
        if found.status_value == DELETED:
            raise NotFound(f"No such {noun}: {record_id}", param=param)
        return found

    async def list(
        self,
        kind: type[R],
        company_id: int,
        filters: RecordFilter | None = None,
        page: PageRequest | None = None,
    ) -> Page[R]:
        """A page of the company's records of ``kind`` passing ``filters``, newest first.

        A kind no list reads (see :data:`treasury_core.listing.STATUSES`) is
        :class:`ValidationFailed` naming the kinds it reads.
        """
        filters = checked_filter(kind, filters or RecordFilter())
        page = checked_page(page)
        rows = await self._storage.run(
            lambda uow: uow.records.page(
                kind, company_id, filters, page.limit + 1, page.starting_after
            ),
            write=False,
        )
        return page_of(rows, page.limit)

    async def delete_bank_account(self, company_id: int, bank_account_id: str) -> BankAccount:
        """Delete the bank account unless a pending withdrawal pays out to it (400
        ``bank_account_in_use``). Completed and failed withdrawals keep naming it.

        The account is locked first, as a new withdrawal to it locks it (withdrawals.py), so a
        withdrawal created meanwhile is either seen here or refused there.
        """
        noun, param = NAMES[BankAccount]
        require_id(bank_account_id, BankAccount.prefix, noun, param)
        pending = RecordFilter(status=MovementStatus.PENDING.value, bank_account_id=bank_account_id)

        def delete(uow: UnitOfWork) -> BankAccount:
            found = uow.records.get(BankAccount, bank_account_id, company_id, for_update=True)
            if found is None or found.status == DELETED:
                raise NotFound(f"No such {noun}: {bank_account_id}", param=param)
            if uow.records.page(Withdrawal, company_id, pending, 1, None):
                raise BankAccountInUse(
                    "A pending withdrawal pays out to this bank account; delete it once the "
                    "withdrawal has completed or failed",
                    param=param,
                )
            deleted = found.model_copy(update={"status": DELETED})
            uow.records.update(deleted)
            return deleted

        return await self._storage.run(delete)

    async def tokens(
        self, company_id: int, customer_email: str, page: PageRequest | None = None
    ) -> Page[PaymentMethodToken]:
        """The saved cards of one customer of the company, newest first."""
        return await self.list(
            PaymentMethodToken, company_id, RecordFilter(customer_email=customer_email), page
        )

    async def forget_token(self, company_id: int, token_id: str) -> PaymentMethodToken:
        """Erase a saved card (a customer's right to be forgotten): the sealed card, the
        provider's reference, the fingerprint, the cardholder's name and e-mail go; a tombstone
        with the card's brand, last4 and expiry stays, so charging it answers
        ``payment_method_token_deleted`` rather than an unknown token.
        """
        noun, param = NAMES[PaymentMethodToken]
        require_id(token_id, PaymentMethodToken.prefix, noun, param)

        def forget(uow: UnitOfWork) -> PaymentMethodToken:
            found = uow.records.get(PaymentMethodToken, token_id, company_id, for_update=True)
            if found is None or found.status == DELETED:
                raise NotFound(f"No such {noun}: {token_id}", param=param)
            erased = found.model_copy(
                update={
                    "status": DELETED,
                    "sealed_card": None,
                    "provider_reference": None,
                    "fingerprint": "",
                    "cardholder_name": None,
                    "customer_email": "",
                }
            )
            uow.records.update(erased)
            return erased

        return await self._storage.run(forget)
