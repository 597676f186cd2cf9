"""The pieces of ``bench events``: its receiver process, its bare client, its report.

The benchmark itself is run by hand (``python -m bench events``); these check that what it
counts and reports is right, against the real receiver process on loopback.
"""

from __future__ import annotations

import base64
import json
import math
import os
import socket
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from bench import events
from bench.events import EventsResult, Load, bare_posts, events_rows, percentile
from bench.http_intents import free_port, run_server

from treasury_core.notifications.verify import verify_webhook

ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


@pytest.fixture
def receiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, int]]:
    """The receiver process (its base URL) and its dead port."""
    port, dead = free_port(), free_port()
    command = [sys.executable, "-m", "bench.events", "receiver", str(port), str(dead)]
    monkeypatch.chdir(ROOT)  # ``-m bench.events`` from the project's root
    with run_server(command, port, tmp_path / "receiver.log"):
        yield f"http://127.0.0.1:{port}", dead


def _event(event_id: str, intent: int, kind: str = events.CREATED) -> bytes:
    data = {"object": {"id": str(intent), "object": "payment_intent"}}
    return json.dumps({"id": event_id, "type": kind, "created": "", "data": data}).encode()


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


async def _post(url: str, event_id: str, body: bytes) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers={"webhook-id": event_id}) as response,
    ):
        assert response.status == 200


async def test_receiver_keeps_the_first_arrival_of_each_created_event(
    receiver: tuple[str, int],
) -> None:
    base, _ = receiver
    hook = f"{base}/hooks/healthy"
    before = time.time()
    await _post(hook, "evt_1", _event("evt_1", 1))
    await _post(hook, "evt_2", _event("evt_2", 2, "merchant_of_record.payment_intent.failed"))
    await _post(hook, "evt_3", _event("evt_3", 3))
    first = _get(f"{base}/created/healthy")
    await _post(hook, "evt_1", _event("evt_1", 1))  # a repeat (at least once)
    after = time.time()

    assert _get(f"{base}/count/healthy") == {"created": 2, "posts": 4, "repeats": 1}
    arrivals = _get(f"{base}/created/healthy")
    assert isinstance(arrivals, dict)
    assert arrivals == first  # the repeat changed no arrival time
    assert set(arrivals) == {"1", "3"}
    assert all(before <= at <= after for at in arrivals.values())
    assert _get(f"{base}/count/other") == {"created": 0, "posts": 0, "repeats": 0}


def test_the_dead_port_accepts_and_never_answers(receiver: tuple[str, int]) -> None:
    _, dead = receiver
    with socket.create_connection(("127.0.0.1", dead), timeout=5) as conn:
        conn.sendall(b"POST /hooks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        conn.settimeout(0.5)
        with pytest.raises(TimeoutError):
            conn.recv(1)


async def test_bare_posts_are_signed_as_the_server_signs(receiver: tuple[str, int]) -> None:
    base, _ = receiver
    body = _event("evt_sample", 7)
    posts, seconds = await bare_posts(f"{base}/hooks/bare", body, SECRET, 0.3)

    assert posts > 0 and seconds >= 0.3
    counted = _get(f"{base}/count/bare")
    assert isinstance(counted, dict)
    assert counted["posts"] == posts
    sample = _get(f"{base}/sample/bare")
    assert isinstance(sample, dict)
    sent = base64.b64decode(sample["body"])
    assert sent == body
    assert verify_webhook(sent, sample["headers"], SECRET)["id"] == "evt_sample"


def _load(answered: dict[str, float], started: float, ended: float) -> Load:
    return Load(answered, 0, started, ended)


def _result(*, arrive_after: float, lost: int = 0) -> EventsResult:
    """1,000 creates/s alone; 100 intents created in 1 s with an endpoint, arriving
    ``arrive_after`` seconds after their answers; the last ``lost`` never arriving."""
    created = {str(n): 1000.0 + n / 100 for n in range(100)}
    arrived = {i: at + arrive_after for i, at in list(created.items())[: 100 - lost]}
    ms = [arrive_after * 1000] * (100 - lost) + [math.inf] * lost
    return EventsResult(
        create=_load({str(n): 0.0 for n in range(1000)}, 0.0, 1.0),
        e2e=_load(created, 1000.0, 1001.0),
        e2e_arrived=arrived,
        latency=_load(created, 1000.0, 1001.0),
        latency_ms=ms,
        bare_posts=150,
        bare_seconds=1.0,
        dead=_load(created, 1000.0, 1001.0),
        dead_ms=ms,
        repeats=0,
    )


def test_the_report_meets_the_targets_of_a_fast_pipeline() -> None:
    rows = events_rows(_result(arrive_after=0.01))

    # 100 events over 1.0 s of creates + 0.01 s: about 0.1 of the 1,000/s create rate.
    assert [row.status for row in rows] == ["", "MISSED", "met", "", "met", "met"]
    assert rows[1].ratio == "0.10 of create rate"
    assert rows[2].figure == "p50 10.0 ms, p99 10.0 ms"
    # 100 deliveries over 0.99 s against 150 bare posts/s.
    assert rows[4].ratio == "0.67 of bare client"


def test_events_not_arrived_count_as_later_than_any() -> None:
    rows = events_rows(_result(arrive_after=0.01, lost=2))

    assert rows[1].status == "MISSED"
    assert "2 not arrived" in rows[1].figure
    assert rows[2].figure.startswith("p50 10.0 ms, p99 > 60 s (not arrived); 2 of 100")
    assert rows[5].status == "MISSED"
    assert percentile([1.0, 2.0, math.inf], 0.5) == 2.0
    assert percentile([1.0] * 99 + [math.inf], 0.99) == 1.0
