"""Acme Payments card provider for treasury-core: an example of a third-party adapter plugin.

Install the package and select it with ``TreasuryConfig(card_provider="acme")``; treasury-core
finds it through the ``treasury`` entry point group (see ``pyproject.toml``).
"""

from acme_cards.api import AcmeApi, AcmeApiError, AcmeCharge, InMemoryAcmeApi
from acme_cards.provider import AcmeCardProvider

__all__ = ["AcmeApi", "AcmeApiError", "AcmeCardProvider", "AcmeCharge", "InMemoryAcmeApi"]
