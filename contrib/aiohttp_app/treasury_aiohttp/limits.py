"""Which rate limiter the app asks: none, the per-process bucket, or the buckets in Redis."""

from __future__ import annotations

from treasury_core.config import TreasuryConfig
from treasury_core.ports import RequestLimiter
from treasury_core.ratelimit import RateLimiter


def build_rate_limiter(config: TreasuryConfig) -> RequestLimiter | None:
    """The limiter ``config`` asks for; ``None`` when ``rate_limit_per_second`` is 0.

    With ``rate_limit_redis_url`` the buckets live in that Redis (the ``redis`` extra), which
    every process naming it shares; without it each process keeps its own.
    """
    rate, burst = config.rate_limit_per_second, config.rate_limit_burst
    if rate <= 0:
        return None
    if config.rate_limit_redis_url is None:
        return RateLimiter(rate, burst)
    try:
        from treasury_redis import RedisRateLimiter
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
        config.rate_limit_redis_url,
        rate,
        burst,
        timeout=config.rate_limit_redis_timeout_seconds,
    )
