import threading
from datetime import UTC

import pytest

from treasury_sandbox import SandboxClock
from treasury_system import SystemClock, UlidIds


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
