"""The interface's balance record (part 2.3), derived from a wallet's ledger account."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from treasury_core.ledger.accounts import Account
from treasury_core.memo import InstanceMemo


class BalanceRecord(BaseModel):
    """A wallet's balances in minor units.

    ``available_balance = balance - pending_holds - pending_out``; ``pending_in`` never adds to it.
    """

    model_config = ConfigDict(frozen=True)

    wallet_id: str
    balance: int
    pending_holds: int
    pending_in: int
    pending_out: int
    available_balance: int
    currency_code: str

    @classmethod
    def of(cls, account: Account) -> BalanceRecord:
        """The balance record of a wallet's ledger account (the wallet id is the account id).

        Made once per account instance: an account is frozen, and the SQL storage's account
        reads (``get_account``, ``wallet_accounts``) hand out one instance per stored row, so a
        polled balance validates nothing. A subclass's records are made every time.
        """
        if cls is not BalanceRecord:
            return cls._made_of(account)
        record = _RECORDS.get(account)
        if record is None:
            record = _RECORDS.put(account, cls._made_of(account))
        return record

    def record_json(self) -> bytes:
        """This record as JSON, rendered once per instance (a polled balance is one instance,
        see :meth:`of`); a subclass's records (which may not stay frozen) every time."""
        if type(self) is not BalanceRecord:
            return self.__pydantic_serializer__.to_json(self)
        rendered = _RENDERED.get(self)
        if rendered is None:
            rendered = _RENDERED.put(self, self.__pydantic_serializer__.to_json(self))
        return rendered

    @classmethod
    def _made_of(cls, account: Account) -> BalanceRecord:
        return cls(
            wallet_id=account.id,
            balance=account.balance,
            pending_holds=account.pending_holds,
            pending_in=account.pending_in,
            pending_out=account.pending_out,
            available_balance=account.available_balance,
            currency_code=account.currency,
        )


#: Balance records by the account they were made of (see ``BalanceRecord.of``).
_RECORDS: InstanceMemo[Account, BalanceRecord] = InstanceMemo()
#: Their JSON (see ``BalanceRecord.record_json``).
_RENDERED: InstanceMemo[BalanceRecord, bytes] = InstanceMemo()
