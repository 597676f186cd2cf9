"""The per-key token bucket kept in Redis, so that several server processes share one limit.

One Lua script refills and spends a key's bucket atomically on the Redis server, with the
server's own ``TIME``: the clocks of the machines running ``treasury serve`` never enter the
arithmetic. Each bucket is a hash (``tokens``, ``at``) that expires once it would have refilled
completely, so idle keys cost nothing.

When Redis cannot answer (down, unreachable, slower than the short timeout), the request is
decided by an in-process bucket instead: the limit degrades to the per-process one, never to
refusing everyone, and a warning is logged once per outage. Redis is tried again after
``retry_seconds``; the first answer ends the outage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from treasury_core.ratelimit import RateLimiter

__all__ = ["BUCKET_SCRIPT", "DEFAULT_PREFIX", "RedisRateLimiter"]

log = logging.getLogger("treasury.ratelimit")

DEFAULT_PREFIX = "treasury:ratelimit:"
DEFAULT_TIMEOUT_SECONDS = 0.25
#: Connections of one process to Redis. A script call holds one for a round trip; a burst of
#: requests queues for a free one (within the timeout) instead of opening a connection each.
MAX_CONNECTIONS = 16

#: KEYS[1] the bucket; ARGV rate (tokens a second), burst. Returns the seconds to wait, as a
#: string ("0" when the request is allowed): Redis would truncate a Lua number to an integer.
BUCKET_SCRIPT = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
-- A failover to a replica whose clock is behind must not drain the bucket.
if now > at then
  tokens = math.min(burst, tokens + (now - at) * rate)
end
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'at', string.format('%.17g', now))
-- Once idle this long the bucket is full again: forgetting it changes nothing.
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return string.format('%.17g', wait)
"""


class RedisRateLimiter:
    """Token buckets keyed by API key id, kept in Redis and shared by every process using it.

    ``rate`` and ``burst`` mean what they mean for the in-process
    :class:`~treasury_core.ratelimit.RateLimiter`, which also serves as the fallback while
    Redis is out. ``timeout`` bounds each step of a Redis call (waiting for a pooled
    connection, connecting, the answer), so that a hung Redis delays the requests that meet it,
    at most once per ``retry_seconds``.
    """

    def __init__(
        self,
        url: str,
        rate: float,
        burst: int,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry_seconds: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            timeout=timeout,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            # One attempt: the fallback, not a retry loop, is the answer to a failure.
            retry=Retry(NoBackoff(), 0),
        )
        self._redis: Redis = Redis.from_pool(pool)
        self._bucket = self._redis.register_script(BUCKET_SCRIPT)
        self._rate = rate
        self._burst = burst
        self._prefix = prefix
        self._retry_seconds = retry_seconds
        self._now = monotonic
        self._fallback = RateLimiter(rate, burst, monotonic=monotonic)
        self._out_until: float | None = None  # while set, an outage is on

    @property
    def degraded(self) -> bool:
        """Whether Redis is out and requests are limited per process."""
        return self._out_until is not None

    async def acquire(self, key: str) -> float:
        """Spend one request of ``key`` in Redis, or in this process while Redis is out."""
        if self._out_until is not None and self._now() < self._out_until:
            return self._fallback.take(key)
        try:
            answer = await self._bucket(keys=[self._prefix + key], args=[self._rate, self._burst])
        except (RedisError, OSError, TimeoutError) as error:
            if self._out_until is None:
                log.warning(
                    "Redis rate limiter unavailable (%s: %s); limiting each API key per process "
                    "until it answers again",
                    type(error).__name__,
                    error,
                )
            self._out_until = self._now() + self._retry_seconds
            return self._fallback.take(key)
        if self._out_until is not None:
            log.warning("Redis rate limiter answers again; the limit is shared again")
            self._out_until = None
        return float(answer)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()
