"""Registers the Acme card provider under the name ``acme`` (the ``treasury`` entry point)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from treasury_core.config import AdapterSettings, TreasuryConfig
from treasury_core.plugins.hookspecs import CardProviderFactory, hookimpl
from treasury_core.ports import CardProvider, Clock


def _acme(config: TreasuryConfig, clock: Clock) -> CardProvider:
    # Imported when the adapter is chosen, not when plugins load: every treasury loads every
    # plugin, and one that does not use Acme should not pay for its client.
    from acme_cards.api import InMemoryAcmeApi
    from acme_cards.provider import AcmeCardProvider
    from acme_cards.settings import AcmeSettings

    # A real package would build its HTTP client here, from its own settings: from the
    # environment (config_from_env read and checked them) or given in code.
    settings = config.adapter_settings(AcmeSettings)
    return AcmeCardProvider(InMemoryAcmeApi(region=settings.region))


@hookimpl
def register_card_provider() -> Mapping[str, CardProviderFactory]:
    """The Acme Payments card provider."""
    return {"acme": _acme}


@hookimpl
def treasury_settings_models() -> Iterable[type[AdapterSettings]]:
    """``TREASURY_ACME_*``: read into the config, never warned about as typos."""
    from acme_cards.settings import AcmeSettings

    return (AcmeSettings,)
