"""Operator keys: the platform operator's credential, bound to no company.

A merchant's key (``sk_…``, ``pk_…``) acts on its own company's records and never asserts a
fact about money outside the system. The operator runs the platform: it imports the bank's
statements, which say what money arrived at and left the treasury's accounts. It does so with
its own credential, an operator key ``ok_…``, which no merchant key can stand in for and which
opens no merchant route.

An operator key has a name (unique among live keys, so ``revoke NAME`` means one key) and is
stored as merchant keys are: its SHA-256 digest only, safe for keys of this entropy.
"""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict

#: The visible prefix of every operator key.
OPERATOR_KEY_PREFIX = "ok_"

# The shape of merchant keys (treasury_core.companies), with the operator's prefix.
_OPERATOR_KEY_SHAPE = re.compile(r"ok_[A-Za-z0-9_-]{13,125}")


class OperatorKey(BaseModel):
    """A stored operator key: the digest of the secret, never the secret itself."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    key_hash: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None = None


class OperatorPrincipal(BaseModel):
    """The operator, as the key it presented: no company (it acts across them)."""

    model_config = ConfigDict(frozen=True)

    key_id: str
    name: str


def is_operator_key(raw_key: str) -> bool:
    """Whether ``raw_key`` has the shape of an operator key (it may still be unknown)."""
    return _OPERATOR_KEY_SHAPE.fullmatch(raw_key) is not None
