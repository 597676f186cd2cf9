"""Redis adapters of treasury-core: the rate limit's buckets shared by every server process.

Installed with the ``redis`` extra; ``TREASURY_RATE_LIMIT_REDIS_URL`` turns it on.
"""

from treasury_redis.ratelimit import DEFAULT_PREFIX, RedisRateLimiter

__all__ = ["DEFAULT_PREFIX", "RedisRateLimiter"]
