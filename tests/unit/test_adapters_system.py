import random
import threading
import time
from datetime import UTC, timedelta

import pytest

from treasury_sandbox import SandboxClock
from treasury_system import SystemClock, UlidIds

CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def test_ulids_are_strictly_increasing_across_threads() -> None:
    ids = UlidIds()
    made: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        local = [ids.new_id("wal") for _ in range(2000)]
        with lock:
            made.extend(local)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8000
    one_thread = [ids.new_id("trf") for _ in range(5000)]
    assert one_thread == sorted(one_thread)
    assert all(len(i) == len("wal_") + 26 for i in made)


def test_a_ulid_is_its_128_bits_in_crockford_base32() -> None:
    """The table-driven encoder against the ULID spec's arithmetic: 26 digits, 5 bits each,
    most significant first, for the extremes and for random values."""
    from treasury_system.ids import _encode

    rng = random.Random(7)
    for value in [0, 1, 31, 32, 1023, 1024, 2**80 - 1, 2**127, 2**128 - 1] + [
        rng.getrandbits(128) for _ in range(2000)
    ]:
        encoded = _encode(value)
        assert len(encoded) == 26
        assert all(c in CROCKFORD for c in encoded)
        assert sum(CROCKFORD.index(c) << 5 * (25 - i) for i, c in enumerate(encoded)) == value


def test_a_ulid_starts_with_its_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    made = UlidIds().new_id("evt").removeprefix("evt_")
    after = time.time_ns() // 1_000_000
    millis = sum(CROCKFORD.index(c) << 5 * (9 - i) for i, c in enumerate(made[:10]))
    assert before <= millis <= after


def test_tokens_are_unguessable_and_distinct() -> None:
    ids = UlidIds()
    tokens = {ids.token(24) for _ in range(1000)}
    assert len(tokens) == 1000
    assert all(len(t) >= 32 for t in tokens)


def test_clocks_are_aware_utc() -> None:
    assert SystemClock().now().tzinfo is UTC
    clock = SandboxClock()
    before = clock.now()
    after = clock.advance(7 * 24 * 3600)
    assert (after - before).days == 7
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)


def test_the_sandbox_clock_catches_up_but_never_goes_back() -> None:
    clock = SandboxClock()
    assert clock.offset == timedelta(0)
    clock.catch_up(timedelta(days=2))
    assert clock.offset == timedelta(days=2)
    # An offset read before this process's own advance committed is older: it is ignored.
    before = clock.now()
    clock.catch_up(timedelta(days=1))
    assert clock.offset == timedelta(days=2)
    assert clock.now() >= before
