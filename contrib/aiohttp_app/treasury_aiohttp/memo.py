"""A bounded memo of what was derived from immutable instances, by identity.

The server's request path derives the same things from the same objects again and again: a
polled intent renders to the same JSON. The SQL storage hands out one instance per stored
version of a row, so remembering the result per instance turns those
repeats into a dictionary lookup. Keyed by identity, not equality: hashing a model by value
costs about as much as deriving from it, and an instance that was changed is a new instance.

What a memo holds is what the process serves anyway: records its storage hands out. Code that
must never hold a secret (the access log) does not use it; its own memo is keyed by a digest.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["InstanceMemo"]

K = TypeVar("K")
V = TypeVar("V")


class InstanceMemo(Generic[K, V]):
    """Values derived from instances of ``K``, at most ``max_entries`` of them.

    Only for instances that never change (frozen models and dataclasses holding immutable
    values): the memo cannot see a change made in place. Each entry holds its instance, so the
    instance's ``id()`` cannot be reused by another object while the entry exists. Once full,
    the memo is emptied (the next lookups refill it): bounded memory, no bookkeeping per hit.
    """

    __slots__ = ("_entries", "max_entries")

    def __init__(self, max_entries: int = 1024) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._entries: dict[int, tuple[K, V]] = {}
        self.max_entries = max_entries

    def get(self, instance: K) -> V | None:
        """What was remembered for this very instance, or ``None`` (so ``None`` itself is
        never worth remembering)."""
        seen = self._entries.get(id(instance))
        if seen is not None and seen[0] is instance:
            return seen[1]
        return None

    def put(self, instance: K, value: V) -> V:
        """Remember ``value`` for ``instance``; returns ``value``."""
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[id(instance)] = (instance, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget everything."""
        self._entries.clear()
