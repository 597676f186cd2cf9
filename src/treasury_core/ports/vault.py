"""The card vault port (card-on-file issue; shaped here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class StoredCard:
    """What may be known about a vaulted card outside the vault: never the number or the CVC."""

    token: str
    brand: str
    last4: str
    expiry_month: int
    expiry_year: int
    fingerprint: str


@runtime_checkable
class Vault(Protocol):
    """Keeps card numbers encrypted; hands out opaque references."""

    def store(self, card_number: str, expiry_month: int, expiry_year: int) -> StoredCard:
        """Encrypt and keep a card; the caller has already checked it."""
        ...

    def reveal(self, token: str) -> str:
        """The card number, for the card provider only."""
        ...
