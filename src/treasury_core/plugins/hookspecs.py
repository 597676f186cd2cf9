"""Hook specifications. Each ``register_*`` hook returns factories keyed by adapter name.

A factory takes the :class:`~treasury_core.config.TreasuryConfig` (and, where it needs them, the
already-built clock) and returns the adapter; it reads its adapter's own settings with
``config.adapter_settings(ItsSettings)``, a :class:`~treasury_core.config.AdapterSettings` model
the plugin lists in ``treasury_settings_models``. Configuration picks an adapter by name; the
default adapters are plugins registered through these same hooks, so a third-party package that
declares an entry point in the ``treasury`` group is a peer of the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

from treasury_core.notifications.events import Event

if TYPE_CHECKING:
    from treasury_core.config import AdapterSettings, TreasuryConfig
    from treasury_core.ports import (
        BankRail,
        CardProvider,
        Clock,
        FxRates,
        IdSource,
        Storage,
        Vault,
        WebhookSender,
    )

PROJECT_NAME = "treasury"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

StorageFactory = Callable[["TreasuryConfig"], "Storage"]
ClockFactory = Callable[["TreasuryConfig"], "Clock"]
IdSourceFactory = Callable[["TreasuryConfig"], "IdSource"]
CardProviderFactory = Callable[["TreasuryConfig", "Clock"], "CardProvider"]
VaultFactory = Callable[["TreasuryConfig"], "Vault"]
FxRatesFactory = Callable[["TreasuryConfig", "Clock"], "FxRates"]
BankRailFactory = Callable[["TreasuryConfig", "Clock"], "BankRail"]
NotifierFactory = Callable[["TreasuryConfig"], "WebhookSender"]


@hookspec
def register_storage() -> Mapping[str, StorageFactory]:
    """Storage adapters by name (``memory``, ``sqlalchemy``, …)."""
    raise NotImplementedError


@hookspec
def register_clock() -> Mapping[str, ClockFactory]:
    """Clocks by name (``system``, ``sandbox``, …)."""
    raise NotImplementedError


@hookspec
def register_id_source() -> Mapping[str, IdSourceFactory]:
    """Id sources by name (``ulid``, …)."""
    raise NotImplementedError


@hookspec
def register_card_provider() -> Mapping[str, CardProviderFactory]:
    """Card providers by name (``sandbox``, …)."""
    raise NotImplementedError


@hookspec
def register_vault() -> Mapping[str, VaultFactory]:
    """Card vaults by name."""
    raise NotImplementedError


@hookspec
def register_fx_rates() -> Mapping[str, FxRatesFactory]:
    """FX rate sources by name."""
    raise NotImplementedError


@hookspec
def register_bank_rail() -> Mapping[str, BankRailFactory]:
    """Bank rails by name."""
    raise NotImplementedError


@hookspec
def register_notifier() -> Mapping[str, NotifierFactory]:
    """Webhook senders by name (what carries webhooks and callbacks over the wire)."""
    raise NotImplementedError


@hookspec
def treasury_event(event: Event) -> None:
    """Called for every event the dispatcher fans out, after its transaction committed, in
    the process that did the fan-out (``treasury serve`` or ``treasury worker``).

    For embedding applications that want events in process (a cache to invalidate, a metric
    to count). At most once: a crash right after the commit loses the event for subscribers
    (never for deliveries; use a webhook where every event matters). An exception is logged
    and stops neither the other subscribers nor the deliveries.
    """


@hookspec
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """The settings models of the plugin's adapters (``StripeSettings``, …), each with its own
    variable prefix.

    :func:`~treasury_core.settings.config_from_env` reads each from the environment into the
    config (refusing a bad value in one line naming its variable, naming what
    :meth:`~treasury_core.config.AdapterSettings.missing` says is lacking), and their variables
    are known ones: never warned about as typos.
    """
    raise NotImplementedError


@hookspec
def treasury_settings_names() -> Iterable[str]:
    """The ``TREASURY_*`` variables the plugin reads itself, beside :class:`TreasuryConfig`'s
    and the settings models', by their full names.

    A set variable that neither the config nor any plugin names is warned about at start, with
    the closest known name (a typo such as ``TREASURY_SANDBOXX`` would otherwise be ignored).
    """
    raise NotImplementedError


@hookspec
def treasury_missing_settings(config: TreasuryConfig) -> Iterable[str]:
    """What ``config`` lacks for the plugin's adapters, one line per setting, each naming its
    variable (``TREASURY_VAULT_KEY`` outside sandbox mode, …); nothing when all is there.

    The command line asks every plugin before it opens anything and reports every missing
    setting at once; an adapter's factory still refuses such a config on its own.
    """
    raise NotImplementedError


#: Every ``register_*`` hook, by the kind of adapter it registers.
REGISTER_HOOKS: Mapping[str, Any] = {
    "storage": register_storage,
    "clock": register_clock,
    "id_source": register_id_source,
    "card_provider": register_card_provider,
    "vault": register_vault,
    "fx_rates": register_fx_rates,
    "bank_rail": register_bank_rail,
    "notifier": register_notifier,
}
