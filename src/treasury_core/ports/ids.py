"""The id port: resource ids and unguessable tokens. Ids sort by creation time."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

#: Crockford's base32 digits in lower case, in ASCII order, so fixed-width numbers written in
#: them sort as text in time order (ids, the time part of lookup ids).
SORTABLE_DIGITS = "0123456789abcdefghjkmnpqrstvwxyz"


@runtime_checkable
class IdSource(Protocol):
    """Makes ids and secrets."""

    def new_id(self, prefix: str) -> str:
        """A new id ``{prefix}_{…}`` that sorts after every id this source made before."""
        ...

    def token(self, nbytes: int = 24) -> str:
        """An unguessable URL-safe string carrying ``nbytes`` random bytes."""
        ...
