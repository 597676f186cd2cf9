"""The per-key token bucket."""

from __future__ import annotations

import pytest

from treasury_core.errors import RateLimited
from treasury_core.ratelimit import RateLimiter


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate() -> None:
    ticks = Ticks()
    limiter = RateLimiter(2.0, 3, monotonic=ticks)
    assert [limiter.take("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("k") == pytest.approx(0.5)  # half a second to the next token
    assert limiter.take("other") == 0.0  # keys are separate
    ticks.now += 0.5
    assert limiter.take("k") == 0.0
    ticks.now += 10  # refills up to the burst, no further
    assert [limiter.take("k") for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.5)]


def test_check_answers_whole_seconds_to_wait() -> None:
    ticks = Ticks()
    limiter = RateLimiter(0.25, 1, monotonic=ticks)
    limiter.check("k")
    with pytest.raises(RateLimited) as refused:
        limiter.check("k")
    assert refused.value.retry_after == 4
    assert refused.value.http_status == 429
