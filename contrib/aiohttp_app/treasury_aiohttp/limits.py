"""Which rate limiters the app asks: none, per-process buckets, or buckets in Redis.

Two limits: requests per API key (``rate_limit_*``), and failed authentications per client
address (``auth_failure_limit_*``), whose buckets live where the first one's do.
"""

from __future__ import annotations

from treasury_aiohttp.settings import AppSettings
from treasury_core.ports import RequestLimiter
from treasury_core.ratelimit import FailureThrottle, RateLimiter

#: Where the failed authentications' buckets live in Redis, apart from the keys' buckets.
AUTH_FAILURE_PREFIX = "treasury:authfail:"


def build_rate_limiter(settings: AppSettings) -> RequestLimiter | None:
    """The per-key limiter ``settings`` ask for; ``None`` when ``rate_limit_per_second`` is 0.

    With ``rate_limit_redis_url`` the buckets live in that Redis (the ``redis`` extra), which
    every process naming it shares; without it each process keeps its own.
    """
    return _build(settings, settings.rate_limit_per_second, settings.rate_limit_burst, None)


def build_failure_throttle(settings: AppSettings) -> FailureThrottle | None:
    """The count of failed authentications per client address; ``None`` when
    ``auth_failure_limit_per_second`` is 0. In the rate limit's Redis when one is set."""
    rate, burst = settings.auth_failure_limit_per_second, settings.auth_failure_limit_burst
    limiter = _build(settings, rate, burst, AUTH_FAILURE_PREFIX)
    return FailureThrottle(limiter) if limiter is not None else None


def _build(
    settings: AppSettings, rate: float, burst: int, prefix: str | None
) -> RequestLimiter | None:
    if rate <= 0:
        return None
    if settings.rate_limit_redis_url is None:
        return RateLimiter(rate, burst)
    try:
        from treasury_redis import DEFAULT_PREFIX, RedisRateLimiter
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith(("redis", "treasury_redis")):
            raise
        # Imported only when the setting asks for it, so that the extra stays optional.
        raise ModuleNotFoundError(
            "TREASURY_RATE_LIMIT_REDIS_URL needs the redis client: "
            "pip install 'treasury-core[redis]'",
            name=exc.name,
        ) from exc
    return RedisRateLimiter(
        settings.rate_limit_redis_url,
        rate,
        burst,
        prefix=prefix or DEFAULT_PREFIX,
        timeout=settings.rate_limit_redis_timeout_seconds,
    )
