"""The adapters a treasury's services share, bundled once by :func:`~treasury_core.bootstrap`.

:class:`Adapters` holds ports and settings only: FX quoting lives in
:mod:`treasury_core.services.movements.fx_quotes`, the wallet-currency cache in
:mod:`treasury_core.services.wallets` and record reads in
:mod:`treasury_core.services.record_reads`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from treasury_core.config import TreasuryConfig
from treasury_core.currency import CurrencyRegistry
from treasury_core.ports import BankRail, Clock, FxRates, IdSource, Storage
from treasury_core.services.events import EventFactory


@dataclass(frozen=True)
class Adapters:
    """The configuration, currencies and ports of one treasury.

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
    #: Builds and writes every event the services write (its payload is the interface's
    #: projection): ``events.write(uow, type_, record)``, ``events.add_announced(uow, ...)``.
    events: EventFactory
    _rail: list[BankRail] = field(default_factory=list, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    @property
    def rail(self) -> BankRail:
        """The bank rail (built on first use)."""
        if not self._rail:
            with self._lock:
                if not self._rail:
                    self._rail.append(self.rail_factory())
        return self._rail[0]
