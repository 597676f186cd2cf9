"""ULID-based ids: 48 bits of milliseconds then 80 random bits, in Crockford base32, lower case.

Ids from one process are strictly increasing (the random part is incremented within a
millisecond, as the ULID spec's monotonic mode does), so ``ORDER BY id`` is creation order and
cursor pagination agrees with ``created_at``.
"""

from __future__ import annotations

import secrets
import threading
import time

from treasury_core.ports.ids import SORTABLE_DIGITS

_ALPHABET = SORTABLE_DIGITS
_RANDOM_BITS = 80


#: Every pair of base32 digits, for ten bits at a time: an id is encoded in 13 table lookups
#: instead of 26 ``divmod`` steps, on every write (each makes two to four ids).
_PAIRS = tuple(a + b for a in _ALPHABET for b in _ALPHABET)
#: The shifts of the 13 ten-bit groups of a 128-bit ULID, most significant first (26 digits
#: hold 130 bits: the first pair's top bits are always zero).
_PAIR_SHIFTS = tuple(range(120, -1, -10))


def _encode(value: int) -> str:
    """``value`` (128 bits) as 26 Crockford base32 digits, two digits per table lookup."""
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])


class UlidIds:
    """Monotonic ULIDs behind a prefix: ``wal_01jd…``; tokens from :mod:`secrets`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def new_id(self, prefix: str) -> str:
        """A new id ``{prefix}_{ulid}``."""
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                ms = self._last_ms
                self._last_random += 1
                if self._last_random >= 1 << _RANDOM_BITS:  # pragma: no cover - 2^80 ids in 1 ms
                    ms += 1
                    self._last_random = secrets.randbits(_RANDOM_BITS - 1)
            else:
                # One bit of headroom keeps increments within a millisecond from overflowing.
                self._last_random = secrets.randbits(_RANDOM_BITS - 1)
            self._last_ms = ms
            value = (ms << _RANDOM_BITS) | self._last_random
        return f"{prefix}_{_encode(value)}"

    def token(self, nbytes: int = 24) -> str:
        """An unguessable URL-safe token."""
        return secrets.token_urlsafe(nbytes)
