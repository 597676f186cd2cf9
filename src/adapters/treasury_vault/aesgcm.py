"""An AES-256-GCM card vault: the :class:`~treasury_core.ports.vault.Vault` port.

Each configured key (32 random bytes) is never used directly: HKDF-SHA256 derives from it an
encryption subkey, a fingerprint subkey and a public key id, each under its own label, so that
no output of one use (a fingerprint, a key id) says anything about another (the ciphertexts).

A sealed card's ``ciphertext`` is ``v1.<kid>.<nonce>.<ct>``: the format version, the id of the
key that sealed it, the 12-byte random nonce and the AES-GCM ciphertext with its tag (both
base64url without padding). The token id it was sealed for is the associated data, so a
ciphertext copied onto another token fails authentication. Rotation: configure the new key as
the current one and the old ones as ``old_keys``; cards sealed under any of them still open,
new seals use the current key.

Fingerprints are keyed with the *current* key's fingerprint subkey, so rotating the key changes
every card's fingerprint; whoever compares fingerprints must compare ones made under one key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from treasury_core.cards.numbers import brand_of
from treasury_core.errors import TreasuryError
from treasury_core.ports.vault import SealedCard, VaultError

__all__ = [
    "KEY_BYTES",
    "MSG_BAD_KEY",
    "MSG_SANDBOX_KEY_OUTSIDE_SANDBOX",
    "MSG_VAULT_KEY_MISSING",
    "SANDBOX_KEY",
    "SANDBOX_KEY_PHRASE",
    "AesGcmVault",
    "VaultKeyMissing",
    "generate_key",
    "parse_key",
]

#: The length of a vault key: AES-256.
KEY_BYTES = 32
#: What :func:`parse_key` says about a key it refuses (never the key itself).
MSG_BAD_KEY = "The vault key must be 32 bytes, base64-encoded"
#: What :class:`VaultKeyMissing` says when no key is configured outside sandbox mode.
MSG_VAULT_KEY_MISSING = (
    "A vault key is required outside sandbox mode: set TREASURY_VAULT_KEY "
    "(generate one with `treasury vault-key`)"
)
#: What :class:`VaultKeyMissing` says when the public sandbox key is configured outside sandbox.
MSG_SANDBOX_KEY_OUTSIDE_SANDBOX = (
    "The public sandbox vault key cannot be used outside sandbox mode: set TREASURY_VAULT_KEY "
    "to a key of your own (generate one with `treasury vault-key`)"
)

#: The phrase the sandbox key is derived from. Public on purpose: the sandbox key protects
#: nothing and must only ever seal test cards.
SANDBOX_KEY_PHRASE = "treasury-core sandbox vault key: public, for test cards only"
#: The sandbox's vault key, ``sha256(SANDBOX_KEY_PHRASE)``: fixed, so sandbox data survives a
#: restart, and public, so it must never seal a real card.
SANDBOX_KEY = hashlib.sha256(SANDBOX_KEY_PHRASE.encode("utf-8")).digest()

_VERSION = "v1"
_NONCE_BYTES = 12  # the size AES-GCM is specified for; random nonces are safe at this size
_TAG_BYTES = 16
_KID_CHARS = 8
# Distinct HKDF labels, so each subkey is independent of the others.
_INFO_ENCRYPTION = b"treasury-vault/v1/encryption"
_INFO_FINGERPRINT = b"treasury-vault/v1/fingerprint"
_INFO_KEY_ID = b"treasury-vault/v1/key-id"
_INFO_SECRETS = b"treasury-vault/v1/secrets"

_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_B64_ANY = re.compile(r"[A-Za-z0-9+/_-]*")

# Messages of VaultError: they name neither the card nor the key (the key id is not secret, but
# an operator needs no more than "which kind of failure" to act).
_MSG_FORMAT = "The sealed card is not in a format this vault can open"
_MSG_UNKNOWN_KEY = "The sealed card was sealed with a key this vault does not hold"
_MSG_NOT_AUTHENTIC = (
    "The sealed card could not be opened: it was altered, or sealed for another token"
)


class VaultKeyMissing(TreasuryError):
    """No usable vault key: none configured outside sandbox mode (or only the public one).

    A deployment error, not a request error: the HTTP answer would be a 500 ``api_error``.
    """

    default_code = "vault_key_missing"


def parse_key(text: str) -> bytes:
    """The 32-byte key ``text`` encodes: standard or url-safe base64, padded or not.

    Surrounding whitespace (a newline from a file or a shell) is ignored. Anything else raises
    ``ValueError`` with :data:`MSG_BAD_KEY`, which does not repeat the text.
    """
    compact = text.strip()
    body = compact.rstrip("=")
    padding = len(compact) - len(body)
    # Padding, if present, must be exactly right; absent, it is restored below.
    if padding and (padding > 2 or len(compact) % 4):
        raise ValueError(MSG_BAD_KEY)
    if not _B64_ANY.fullmatch(body) or len(body) % 4 == 1:
        raise ValueError(MSG_BAD_KEY)
    standard = body.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        # ``from None``: the chained exception must not carry the text anywhere either.
        raise ValueError(MSG_BAD_KEY) from None
    if len(raw) != KEY_BYTES:
        raise ValueError(MSG_BAD_KEY)
    return raw


def generate_key() -> str:
    """A new random vault key, url-safe base64 without padding (43 characters)."""
    return _b64url_encode(os.urandom(KEY_BYTES))


def _b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes | None:
    """The bytes of unpadded base64url ``text``, or None if it is not exactly that."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        return None
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    # Only the canonical spelling is accepted, so one ciphertext has one text.
    return raw if _b64url_encode(raw) == text else None


def _derive(key: bytes, info: bytes, length: int = 32) -> bytes:
    # An HKDF object derives once; a fresh one per label.
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(key)


def _is_ascii_digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


class _KeyMaterial:
    """What one configured key is used as: never the key itself."""

    __slots__ = ("aead", "fingerprint_key", "kid", "secrets_key")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise ValueError(MSG_BAD_KEY)
        self.kid = _derive(key, _INFO_KEY_ID, 4).hex()[:_KID_CHARS]
        self.aead = AESGCM(_derive(key, _INFO_ENCRYPTION))
        self.fingerprint_key = _derive(key, _INFO_FINGERPRINT)
        self.secrets_key = _derive(key, _INFO_SECRETS)


class AesGcmVault:
    """Seals card numbers with AES-256-GCM under ``key``; opens them under it or ``old_keys``.

    Each key is 32 bytes (:func:`parse_key` reads the configured text). ``old_keys`` are only
    ever used to open; seals and fingerprints use ``key``.
    """

    __slots__ = ("_by_kid", "_current")

    def __init__(self, key: bytes, old_keys: Sequence[bytes] = ()) -> None:
        """Derive the subkeys of ``key`` and each of ``old_keys`` (``ValueError`` if one is bad)."""
        self._current = _KeyMaterial(key)
        # A list per key id: two different keys sharing a 32-bit id is unlikely, not impossible,
        # and trying both then costs nothing.
        self._by_kid: dict[str, list[_KeyMaterial]] = {self._current.kid: [self._current]}
        seen = {bytes(key)}
        for old in old_keys:
            if old in seen:
                continue  # the same key listed twice (or kept after becoming current)
            seen.add(old)
            material = _KeyMaterial(old)
            self._by_kid.setdefault(material.kid, []).append(material)

    @property
    def key_id(self) -> str:
        """The id of the current key, as it appears in new ciphertexts (not secret)."""
        return self._current.kid

    @property
    def key_ids(self) -> frozenset[str]:
        """The ids of every key this vault can open with, the current one included."""
        return frozenset(self._by_kid)

    def __repr__(self) -> str:
        return f"AesGcmVault(key_id={self.key_id!r}, key_ids={sorted(self.key_ids)!r})"

    def seal(self, number: str, expiry_month: int, expiry_year: int, *, context: str) -> SealedCard:
        """Encrypt ``number`` (digits only, already checked) bound to ``context`` (the token id).

        A new random nonce per seal, so sealing the same card twice gives two ciphertexts.
        """
        if not _is_ascii_digits(number):
            # A programming error (the caller checks the card first); the number is not echoed.
            raise ValueError("The vault seals card numbers as digits only")
        nonce = os.urandom(_NONCE_BYTES)
        ct = self._current.aead.encrypt(nonce, number.encode("ascii"), context.encode("utf-8"))
        return SealedCard(
            ciphertext=".".join(
                (_VERSION, self._current.kid, _b64url_encode(nonce), _b64url_encode(ct))
            ),
            brand=brand_of(number),
            last4=number[-4:],
            expiry_month=expiry_month,
            expiry_year=expiry_year,
            fingerprint=self._fingerprint(self._current, number),
        )

    def open(self, sealed: SealedCard, *, context: str) -> str:
        """The card number sealed in ``sealed`` for ``context``. Raises :class:`VaultError`.

        Fails if the key that sealed it is not held, the text was altered, or it was sealed for
        another context; the message says which kind of failure, nothing about the card.
        """
        parts = sealed.ciphertext.split(".") if isinstance(sealed.ciphertext, str) else []
        if len(parts) != 4 or parts[0] != _VERSION:
            raise VaultError(_MSG_FORMAT)
        _, kid, nonce_text, ct_text = parts
        nonce = _b64url_decode(nonce_text)
        ct = _b64url_decode(ct_text)
        if nonce is None or len(nonce) != _NONCE_BYTES or ct is None or len(ct) <= _TAG_BYTES:
            raise VaultError(_MSG_FORMAT)
        candidates = self._by_kid.get(kid)
        if not candidates:
            raise VaultError(_MSG_UNKNOWN_KEY)
        try:
            aad = context.encode("utf-8")
        except UnicodeEncodeError:
            raise VaultError(_MSG_NOT_AUTHENTIC) from None
        for material in candidates:
            try:
                plaintext = material.aead.decrypt(nonce, ct, aad)
            except InvalidTag:
                continue
            number = plaintext.decode("ascii", errors="replace")
            if not _is_ascii_digits(number):
                # Authentic but not a card number: only a bug (or a stolen key) makes this.
                raise VaultError(_MSG_FORMAT)
            return number
        raise VaultError(_MSG_NOT_AUTHENTIC)

    def fingerprint(self, number: str) -> str:
        """``fp_`` and 32 hex characters of HMAC-SHA256 of ``number`` under the current key.

        Equal for equal numbers under one key; different keys give unrelated fingerprints.
        """
        if not _is_ascii_digits(number):
            raise ValueError("The vault fingerprints card numbers as digits only")
        return self._fingerprint(self._current, number)

    def derive_secret(self, purpose: str, message: str) -> str:
        """43 url-safe characters of HMAC-SHA256 over ``purpose`` and ``message`` under the
        current key's secrets subkey (unrelated to the encryption and fingerprint subkeys)."""
        data = purpose.encode() + b"\0" + message.encode()
        return _b64url_encode(hmac.new(self._current.secrets_key, data, hashlib.sha256).digest())

    @staticmethod
    def _fingerprint(material: _KeyMaterial, number: str) -> str:
        digest = hmac.new(material.fingerprint_key, number.encode("ascii"), hashlib.sha256)
        return "fp_" + digest.hexdigest()[:32]
