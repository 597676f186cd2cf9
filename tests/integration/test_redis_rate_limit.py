"""The token bucket kept in Redis (treasury_redis): its Lua script against a real Redis, the
limit shared between clients as between processes, and the fall back to a per-process bucket
while Redis is out (down, hung), with one warning per outage and recovery when it answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.listening import free_port

redis_asyncio = pytest.importorskip("redis.asyncio", reason="the redis extra is not installed")

from treasury_redis import RedisRateLimiter  # noqa: E402 (only with the extra)

SLOW = 0.001  # tokens a second: nothing refills while a test runs
#: For the tests of the shared bucket: a loaded machine must not look like a Redis outage.
PATIENT = 10.0


class Ticks:
    """A monotonic clock the test steps (the limiter's retry interval and fallback buckets)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def prefix(redis_url: str) -> AsyncIterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    prefix = f"treasury-test:{uuid.uuid4().hex}:"
    yield prefix
    client = redis_asyncio.Redis.from_url(redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=prefix + "*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def limiter(
    url: str, rate: float, burst: int, **options: object
) -> AsyncIterator[RedisRateLimiter]:
    options.setdefault("timeout", PATIENT)
    made = RedisRateLimiter(url, rate, burst, **options)  # type: ignore[arg-type]
    try:
        yield made
    finally:
        await made.close()


async def test_a_burst_then_the_wait_and_keys_apart(redis_url: str, prefix: str) -> None:
    async with limiter(redis_url, SLOW, 3, prefix=prefix) as bucket:
        assert [await bucket.acquire("k") for _ in range(3)] == [0.0, 0.0, 0.0]
        # A whole token at 0.001/s: a thousand seconds, as the in-process bucket answers.
        assert await bucket.acquire("k") == pytest.approx(1000, rel=0.01)
        assert await bucket.acquire("other") == 0.0
        assert not bucket.degraded


async def test_two_clients_share_one_bucket_under_concurrency(redis_url: str, prefix: str) -> None:
    # Two limiters with their own connections stand for two server processes.
    async with (
        limiter(redis_url, SLOW, 10, prefix=prefix) as one,
        limiter(redis_url, SLOW, 10, prefix=prefix) as two,
    ):
        waits = await asyncio.gather(
            *(bucket.acquire("shared") for bucket in (one, two) for _ in range(40))
        )
    assert sum(1 for wait in waits if wait == 0.0) == 10


async def test_the_bucket_refills_at_the_rate_by_redis_time(redis_url: str, prefix: str) -> None:
    client = redis_asyncio.Redis.from_url(redis_url)
    try:
        async with limiter(redis_url, 0.5, 2, prefix=prefix) as bucket:
            assert [await bucket.acquire("k") for _ in range(2)] == [0.0, 0.0]
            # As if the last request were 3 s earlier (by Redis's clock): 1.5 tokens back.
            await client.hincrbyfloat(prefix + "k", "at", -3.0)
            assert await bucket.acquire("k") == 0.0
            assert 0 < await bucket.acquire("k") <= 1.0  # half a token left, at 0.5 a second
            # An idle bucket expires once it would be full again (plus a second), not later.
            ttl = await client.pttl(prefix + "k")
            assert 0 < ttl <= 4_000
    finally:
        await client.aclose()


async def test_redis_down_falls_back_to_the_process_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ticks = Ticks()
    caplog.set_level(logging.WARNING, logger="treasury.ratelimit")
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    async with limiter(dead, SLOW, 2, monotonic=ticks, retry_seconds=1.0) as bucket:
        waits = [await bucket.acquire("k") for _ in range(3)]
        ticks.now += 5  # Redis is tried again, still down: the same outage, no new warning
        waits += [await bucket.acquire("k") for _ in range(2)]
        assert bucket.degraded
    # Limited per process: the burst passes, the rest waits; nobody is refused outright.
    assert waits[:2] == [0.0, 0.0]
    assert all(wait > 0 for wait in waits[2:])
    warnings = [r for r in caplog.records if r.name == "treasury.ratelimit"]
    assert len(warnings) == 1
    assert "per process" in warnings[0].getMessage()


async def test_a_hung_redis_times_out_to_the_fallback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="treasury.ratelimit")
    held: list[asyncio.StreamWriter] = []

    async def never_answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accepts and reads nothing back: a Redis that hangs

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with limiter(f"redis://127.0.0.1:{port}/0", SLOW, 1, timeout=0.05) as bucket:
            assert await bucket.acquire("k") == 0.0
            assert await bucket.acquire("k") > 0  # the process's own bucket, not Redis's
            assert bucket.degraded
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
    assert any("TimeoutError" in r.getMessage() for r in caplog.records)


class SwitchableProxy:
    """A TCP relay to the real Redis that the test turns off (connections cut, new ones refused)
    and on again: a Redis outage and its end, without touching the shared Redis."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = True
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        self.up = False
        for writer in self._writers:
            writer.close()
        self._writers.clear()

    async def close(self) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


async def test_the_limit_is_shared_again_when_redis_answers(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    from urllib.parse import urlsplit

    caplog.set_level(logging.WARNING, logger="treasury.ratelimit")
    parts = urlsplit(redis_url)
    proxy = SwitchableProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    await proxy.start()
    db = parts.path or "/0"
    ticks = Ticks()
    client = redis_asyncio.Redis.from_url(redis_url)
    try:
        async with limiter(
            f"redis://127.0.0.1:{proxy.port}{db}", SLOW, 3, prefix=prefix, monotonic=ticks
        ) as bucket:
            assert await bucket.acquire("k") == 0.0  # through Redis
            assert float(await client.hget(prefix + "k", "tokens")) == pytest.approx(2, abs=0.01)
            proxy.cut()
            assert await bucket.acquire("k") == 0.0  # the process's bucket
            assert bucket.degraded
            assert float(await client.hget(prefix + "k", "tokens")) == pytest.approx(2, abs=0.01)
            proxy.up = True
            ticks.now += 1.5  # past the retry interval
            assert await bucket.acquire("k") == 0.0
            assert not bucket.degraded
            assert float(await client.hget(prefix + "k", "tokens")) == pytest.approx(1, abs=0.01)
    finally:
        await client.aclose()
        await proxy.close()
    messages = [r.getMessage() for r in caplog.records if r.name == "treasury.ratelimit"]
    assert len(messages) == 2
    assert "unavailable" in messages[0]
    assert "answers again" in messages[1]
