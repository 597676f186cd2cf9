"""The rate-limiter port: whether an API key may make one more request now.

The HTTP app asks it once per authenticated request. The in-process token bucket
(:class:`treasury_core.ratelimit.RateLimiter`) implements it, and so does the Redis adapter
(``treasury_redis``), whose buckets several server processes share.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class RequestLimiter(Protocol):
    """Token buckets keyed by API key id, however and wherever they are kept."""

    async def acquire(self, key: str) -> float:
        """Spend one request of ``key``: ``0.0`` when it is allowed, else the seconds until
        one would be. Never raises for the limiter's own trouble (a store that is down): a
        limiter that cannot decide lets the caller fall back rather than refuse everyone."""
        ...

    async def close(self) -> None:
        """Release what the limiter holds (connections); it is not used afterwards."""
        ...
