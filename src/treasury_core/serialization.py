"""How records render values the interface fixes: timestamps are ISO 8601 with ``+00:00``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import PlainSerializer


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return value.astimezone(UTC).isoformat()


#: A UTC timestamp rendered as ISO 8601 with an explicit offset, e.g. ``2026-01-01T00:00:00+00:00``.
Timestamp = Annotated[datetime, PlainSerializer(_iso, return_type=str, when_used="json")]
