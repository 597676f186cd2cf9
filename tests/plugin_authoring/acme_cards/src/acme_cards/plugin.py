"""Registers the Acme card provider under the name ``acme`` (the ``treasury`` entry point)."""

from __future__ import annotations

from collections.abc import Mapping

from treasury_core.config import TreasuryConfig
from treasury_core.plugins.hookspecs import CardProviderFactory, hookimpl
from treasury_core.ports import CardProvider, Clock


def _acme(config: TreasuryConfig, clock: Clock) -> CardProvider:
    # Imported when the adapter is chosen, not when plugins load: every treasury loads every
    # plugin, and one that does not use Acme should not pay for its client.
    from acme_cards.api import InMemoryAcmeApi
    from acme_cards.provider import AcmeCardProvider

    # A real package would build its HTTP client here, from its own settings (TreasuryConfig
    # has no fields for third parties; the environment or a file of the plugin's are usual).
    return AcmeCardProvider(InMemoryAcmeApi())


@hookimpl
def register_card_provider() -> Mapping[str, CardProviderFactory]:
    """The Acme Payments card provider."""
    return {"acme": _acme}
