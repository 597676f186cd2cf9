"""Companies (tenants), their merchant accounts, and API keys.

A company owns everything: wallets, merchant accounts, keys. A key is ``sk_…`` (secret) or
``pk_…`` (publishable) followed by random characters; only its SHA-256 digest is stored, which is
safe for keys of this entropy and lets a lookup go straight to the row by an index.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class KeyKind(StrEnum):
    """The two kinds of API key."""

    SECRET = "secret"
    PUBLISHABLE = "publishable"

    @property
    def prefix(self) -> str:
        """The visible prefix of keys of this kind."""
        return "sk_" if self is KeyKind.SECRET else "pk_"


class Company(BaseModel):
    """A tenant."""

    model_config = ConfigDict(frozen=True)

    id: int
    name: str
    created_at: datetime


class MerchantAccount(BaseModel):
    """A merchant account of a company; payment intents carry its integer id as ``account_id``."""

    model_config = ConfigDict(frozen=True)

    id: int
    company_id: int
    name: str
    created_at: datetime


class ApiKey(BaseModel):
    """A stored API key: the digest of the secret, never the secret itself."""

    model_config = ConfigDict(frozen=True)

    id: str
    company_id: int
    kind: KeyKind
    key_hash: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None = None


class Principal(BaseModel):
    """Who is calling: the company and the kind of key presented."""

    model_config = ConfigDict(frozen=True)

    company_id: int
    key_id: str
    kind: KeyKind

    @property
    def is_secret(self) -> bool:
        """True for a secret key."""
        return self.kind is KeyKind.SECRET


def hash_api_key(raw_key: str) -> str:
    """The stored digest of ``raw_key``."""
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


_KEY_SHAPE = re.compile(r"[sp]k_[A-Za-z0-9_-]{13,125}")


def key_kind_of(raw_key: str) -> KeyKind | None:
    """The kind a key claims by its prefix, or ``None`` for a string that is no key of ours.

    Keys are URL-safe ASCII; anything else (including undecodable header bytes) is refused
    here, before it is hashed or looked up.
    """
    if _KEY_SHAPE.fullmatch(raw_key) is None:
        return None
    return KeyKind.SECRET if raw_key.startswith("sk_") else KeyKind.PUBLISHABLE
