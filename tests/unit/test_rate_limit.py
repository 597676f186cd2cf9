"""The per-key token bucket, and failed authentications counted in one."""

from __future__ import annotations

import pytest

from treasury_core.errors import ErrorKind, RateLimited
from treasury_core.ratelimit import FailureThrottle, RateLimiter


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
    assert refused.value.kind is ErrorKind.RATE_LIMITED


async def test_the_in_process_bucket_is_a_request_limiter() -> None:
    from treasury_core.ports import RequestLimiter

    ticks = Ticks()
    limiter = RateLimiter(1.0, 1, monotonic=ticks)
    assert isinstance(limiter, RequestLimiter)
    assert [await limiter.acquire("k"), await limiter.acquire("k")] == [0.0, 1.0]
    await limiter.close()


async def test_the_app_builds_the_limiter_the_settings_name() -> None:
    from treasury_aiohttp.limits import build_rate_limiter
    from treasury_aiohttp.settings import AppSettings

    assert build_rate_limiter(AppSettings(rate_limit_per_second=0)) is None
    assert type(build_rate_limiter(AppSettings())) is RateLimiter  # as before issue 26
    redis_limiter = pytest.importorskip("treasury_redis", reason="the redis extra")
    shared = build_rate_limiter(AppSettings(rate_limit_redis_url="redis://127.0.0.1:1/0"))
    assert isinstance(shared, redis_limiter.RedisRateLimiter)  # nothing connects until asked
    await shared.close()


def test_a_redis_url_must_name_redis_and_stays_hidden_in_errors() -> None:
    from treasury_aiohttp.settings import AppSettings
    from treasury_core.settings import BadSetting, config_from_env

    url = "http://user:hunter2@cache:6379/0"
    with pytest.raises(BadSetting) as refused:
        config_from_env({"TREASURY_RATE_LIMIT_REDIS_URL": url})
    assert "TREASURY_RATE_LIMIT_REDIS_URL" in str(refused.value)
    assert "hunter2" not in str(refused.value)
    config = config_from_env({"TREASURY_RATE_LIMIT_REDIS_URL": "rediss://cache:6380/1"})
    assert config.adapter_settings(AppSettings).rate_limit_redis_url == "rediss://cache:6380/1"


def test_the_buckets_kept_are_bounded_full_ones_first() -> None:
    ticks = Ticks()
    limiter = RateLimiter(1.0, 2, monotonic=ticks, max_keys=3)
    limiter.take("busy")
    limiter.take("busy")  # empty: remembered while others come and go
    for n in range(50):
        limiter.take(f"client-{n}")
        ticks.now += 5  # each refills completely before the next arrives
    assert len(limiter._buckets) <= 3
    assert limiter.take("busy") == 0.0  # refilled by now; a forgotten bucket is a full one


async def test_failures_are_refused_here_once_the_bucket_is_spent() -> None:
    ticks = Ticks()
    throttle = FailureThrottle(RateLimiter(0.5, 2, monotonic=ticks), monotonic=ticks)
    assert throttle.refusal("10.0.0.1") == 0.0
    assert [await throttle.failed("10.0.0.1") for _ in range(2)] == [0.0, 0.0]
    assert throttle.refusal("10.0.0.1") == 0.0  # the next try is still looked up
    assert await throttle.failed("10.0.0.1") == pytest.approx(2.0)
    assert throttle.refusal("10.0.0.1") == pytest.approx(2.0)  # refused without a lookup
    assert throttle.refusal("10.0.0.2") == 0.0  # another client is not
    ticks.now += 2.0
    assert throttle.refusal("10.0.0.1") == 0.0
    assert await throttle.failed("10.0.0.1") == 0.0  # one token refilled in the meantime
