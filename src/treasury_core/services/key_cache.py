"""A process's memory of keys that authenticated: a hit skips storage for a while.

A revocation made through this process ends its keys here at once; other processes see it
when their entries expire. A lookup that started before a revocation and ends after it is not
remembered, so it cannot bring a revoked key back.
"""

from __future__ import annotations

import time
from typing import Generic, Protocol, TypeVar


class _Keyed(Protocol):
    @property
    def key_id(self) -> str: ...


P = TypeVar("P", bound=_Keyed)

#: At most this many keys are remembered at once.
KEY_CACHE_MAX = 10_000


class KeyCache(Generic[P]):
    """Principals by key digest, each until a monotonic deadline ``seconds`` after it was put
    (0: nothing is remembered)."""

    def __init__(self, *, seconds: float) -> None:
        self._seconds = seconds
        self._entries: dict[str, tuple[P, float]] = {}
        # Bumped by every revocation: a lookup that started before one is not remembered.
        self._revocations = 0

    def get(self, digest: str) -> P | None:
        """The principal remembered for ``digest``, if its time is not up."""
        entry = self._entries.get(digest)
        if entry is not None and entry[1] > time.monotonic():
            return entry[0]
        return None

    @property
    def generation(self) -> int:
        """Taken before a lookup and handed to :meth:`put` after it."""
        return self._revocations

    def put(self, digest: str, principal: P, generation: int) -> None:
        """Remember ``principal``, unless a revocation came since ``generation`` was taken."""
        if self._seconds <= 0 or generation != self._revocations:
            return
        if len(self._entries) >= KEY_CACHE_MAX:
            self._entries.clear()  # bounded; the next lookups refill it
        self._entries[digest] = (principal, time.monotonic() + self._seconds)

    def forget(self, key_ids: set[str]) -> None:
        """Drop these keys at once (they were revoked here)."""
        self._revocations += 1
        self._entries = {
            digest: entry
            for digest, entry in self._entries.items()
            if entry[0].key_id not in key_ids
        }
