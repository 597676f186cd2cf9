"""Opening the accounts the system itself holds, once, when a treasury is assembled."""

from __future__ import annotations

from datetime import datetime

from treasury_core.config import TreasuryConfig
from treasury_core.currency import CurrencyRegistry
from treasury_core.movements.ledger import system_accounts
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.services.movements.safeguarding import open_mirrors


def open_system_accounts(
    storage: Storage, config: TreasuryConfig, currencies: CurrencyRegistry, now: datetime
) -> None:
    """Create the world, FX and fee accounts of every enabled currency that lacks them,
    and the mirror of every configured treasury bank account
    (:func:`~treasury_core.services.movements.safeguarding.open_mirrors`).

    Done once when the treasury is assembled, so no business operation ever creates an
    account (a refused operation then leaves the ledger exactly as it was).
    """
    accounts = system_accounts(*(c.code for c in currencies))

    def ensure(uow: UnitOfWork) -> None:
        for account in accounts:
            uow.ledger.ensure_account(account)

    storage.run_sync(ensure)
    open_mirrors(storage, config, currencies, now)
