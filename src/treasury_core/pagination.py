"""Cursor pagination for every list: newest first, ``limit`` 1–100, ``starting_after`` an id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_LIMIT = 20
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
