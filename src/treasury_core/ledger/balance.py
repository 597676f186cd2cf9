"""The interface's balance record (part 2.3), derived from a wallet's ledger account."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from treasury_core.ledger.accounts import Account


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
        """The balance record of a wallet's ledger account (the wallet id is the account id)."""
        return cls(
            wallet_id=account.id,
            balance=account.balance,
            pending_holds=account.pending_holds,
            pending_in=account.pending_in,
            pending_out=account.pending_out,
            available_balance=account.available_balance,
            currency_code=account.currency,
        )

    def record_json(self) -> bytes:
        """This record as JSON (an HTTP server that answers polled balances may remember it
        per record, as ``treasury_aiohttp.rendering`` does)."""
        return self.__pydantic_serializer__.to_json(self)
