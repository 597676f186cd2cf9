"""The limits met at authentication: requests per key, failed authentications per client.

Each request made with a real key, on the API or from a dashboard session, spends one token of
that key's bucket (``rate_limit_*``, :func:`count_request`).

Every wrong API key and every wrong dashboard sign-in spends one token of its client's bucket
(``auth_failure_limit_per_second``, ``auth_failure_limit_burst``; in the rate limit's Redis
when one is set; :class:`~treasury_core.ratelimit.FailureThrottle`). Once it is empty, the
client's keys are answered 429 (saying so) without being looked up, until it refills; a
good key cannot be told from a bad one without the lookup being saved, so it waits too. A
successful authentication spends nothing, so a client that gets its keys right never meets
this limit.

The client is ``request.remote``, the address the access log writes: the peer's, unless the
embedding application rewrote it (aiohttp's ``request.clone(remote=…)``, as a forwarded-headers
middleware does); ``X-Forwarded-For`` is not read, so behind a proxy every client shares the
proxy's bucket unless that is set up.
"""

from __future__ import annotations

from aiohttp import web

from treasury_aiohttp.keys import AUTH_FAILURES_KEY, RATE_LIMITER_KEY
from treasury_core.ratelimit import TOO_MANY_FAILURES, refuse_if_over


def client_address(request: web.Request) -> str:
    """The client as the access log names it."""
    return request.remote or "-"


def refuse_if_failing(request: web.Request) -> None:
    """Raise :class:`~treasury_core.errors.RateLimited` when the client is over its failures
    (no I/O: this process remembers)."""
    throttle = request.app.get(AUTH_FAILURES_KEY)
    if throttle is not None:
        refuse_if_over(throttle.refusal(client_address(request)), TOO_MANY_FAILURES)


async def count_failure(request: web.Request) -> None:
    """Count one failed authentication of the client; raise
    :class:`~treasury_core.errors.RateLimited` when it was one too many."""
    throttle = request.app.get(AUTH_FAILURES_KEY)
    if throttle is not None:
        refuse_if_over(await throttle.failed(client_address(request)), TOO_MANY_FAILURES)


async def count_request(request: web.Request, key_id: str) -> None:
    """Count a request against its key's rate limit, once the key is known to be real."""
    limiter = request.app.get(RATE_LIMITER_KEY)
    if limiter is not None:
        refuse_if_over(await limiter.acquire(key_id))
