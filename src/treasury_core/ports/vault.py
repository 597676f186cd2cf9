"""The card vault port: card numbers sealed for storage, opened only to charge them.

The vault does cryptography only; what it seals is stored by the storage port inside the
record of the saved-card token, in the same transaction as the rest of the tokenization. So a
token and its sealed card appear or vanish together, and no second store has to agree with the
database.

The caller has already checked the card (Luhn, length, expiry: :mod:`treasury_core.cards`).
The CVC never reaches the vault: it is used for the authorization check and dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from treasury_core.errors import TreasuryError


class VaultError(TreasuryError):
    """A sealed card could not be opened: the wrong key, or a ciphertext that was altered.

    Not the customer's fault and nothing they can fix, so the HTTP answer is a 500
    (``api_error``) and the message says nothing about the card.
    """

    default_code = "vault_error"


@dataclass(frozen=True, slots=True)
class SealedCard:
    """A card as storage keeps it: the number encrypted, and what may be shown about it.

    ``ciphertext`` is opaque to everything but a vault holding the key that sealed it (it names
    that key, so a rotated vault can still open older cards). ``fingerprint`` is a keyed hash
    of the number: equal for the same card number under the same vault key, useless without it.
    """

    ciphertext: str
    brand: str
    last4: str
    expiry_month: int
    expiry_year: int
    fingerprint: str


@runtime_checkable
class Vault(Protocol):
    """Seals card numbers for storage and opens them again for the card provider; derives the
    secrets the server must recompute. Everything here depends on the vault's key."""

    def seal(self, number: str, expiry_month: int, expiry_year: int, *, context: str) -> SealedCard:
        """Encrypt ``number`` (digits only, already checked) bound to ``context``.

        ``context`` (the token id) is authenticated with the ciphertext, so a sealed card copied
        onto another token does not open.
        """
        ...

    def open(self, sealed: SealedCard, *, context: str) -> str:
        """The card number, for the card provider only. Raises :class:`VaultError`."""
        ...

    def fingerprint(self, number: str) -> str:
        """The keyed fingerprint of ``number`` (digits only), as :meth:`seal` records it."""
        ...

    def derive_secret(self, purpose: str, message: str) -> str:
        """A secret the server can compute again but nobody without the vault's key can:
        a keyed digest of ``message`` for ``purpose`` (URL-safe text, 256 bits).

        Used for the hosted pages' URL secrets, so that nothing stored (the database, the
        idempotency records) is enough to rebuild a working URL.
        """
        ...
