"""Cursor pagination for every list: newest first, ``limit`` 1–100, ``starting_after`` an id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from treasury_core.errors import ValidationFailed
from treasury_core.validation import is_resource_id

T = TypeVar("T")

DEFAULT_LIMIT = 20
MIN_LIMIT = 1
MAX_LIMIT = 100


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list and whether more items follow it."""

    items: list[T]
    has_more: bool


@dataclass(frozen=True, slots=True)
class PageRequest:
    """Which page to read: at most ``limit`` items with ids older than ``starting_after``."""

    limit: int = DEFAULT_LIMIT
    starting_after: str | None = None


def page_of(rows: list[T], limit: int) -> Page[T]:
    """Cut ``rows`` (read with ``limit + 1``) into a page: the extra row only says more remain."""
    return Page(items=rows[:limit], has_more=len(rows) > limit)


def checked_page(page: PageRequest | None) -> PageRequest:
    """``page`` (default: the first 20), refused unless ``limit`` is 1–100 and the cursor an id."""
    page = page or PageRequest()
    if page.starting_after is not None and not is_resource_id(page.starting_after):
        raise ValidationFailed(
            "starting_after must be an id from a previous page", param="starting_after"
        )
    limit = page.limit
    if isinstance(limit, bool) or not isinstance(limit, int) or not MIN_LIMIT <= limit <= MAX_LIMIT:
        raise ValidationFailed(
            f"limit must be an integer from {MIN_LIMIT} to {MAX_LIMIT}", param="limit"
        )
    return page
