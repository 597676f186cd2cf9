"""When a failed delivery is tried again (decisions.md: the published schedule).

A delivery is attempted at once, then after each failure after the next delay below, measured
on the business clock (so the sandbox's ``clock/advance`` drives retries); after the last one
fails the delivery is marked failed. Eight attempts in all, over about 28 hours.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

#: The delays between attempts: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
RETRY_DELAYS: Final[tuple[timedelta, ...]] = (
    timedelta(seconds=5),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=5),
    timedelta(hours=10),
    timedelta(hours=10),
)

#: Attempts before a delivery is given up: the first and one per delay.
MAX_ATTEMPTS: Final = len(RETRY_DELAYS) + 1


def next_attempt_at(attempts_made: int, now: datetime) -> datetime | None:
    """When to try again after ``attempts_made`` failed attempts; ``None``: give up."""
    if attempts_made >= MAX_ATTEMPTS:
        return None
    return now + RETRY_DELAYS[attempts_made - 1]
