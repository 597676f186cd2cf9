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
from treasury_core.movements.records import TreasuryRecord
from treasury_core.notifications.events import Event, EventType
from treasury_core.ports import BankRail, Clock, FxRates, IdSource, Storage, UnitOfWork
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
    #: Builds every event the services write (its payload is the interface's projection).
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
