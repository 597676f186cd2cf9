"""The storage's worker threads keep a thread pool executor's rules with a lighter hop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from treasury_core.worker_threads import BrokenWorkerThreads, WorkerThreads


@pytest.fixture
def started() -> list[str]:
    return []


@pytest.fixture
def threads(started: list[str]) -> Iterator[WorkerThreads]:
    workers = WorkerThreads(2, "test-worker", lambda: started.append(_current_name()))
    try:
        yield workers
    finally:
        workers.shutdown()


def _current_name() -> str:
    return threading.current_thread().name


def test_a_call_runs_on_a_worker_thread_and_returns_its_value(
    threads: WorkerThreads, started: list[str]
) -> None:
    async def main() -> str:
        return await threads.run(_current_name)

    assert asyncio.run(main()) == "test-worker_0"
    assert started == ["test-worker_0"]


def test_an_exception_reaches_the_awaiting_task(threads: WorkerThreads) -> None:
    class Refused(Exception):
        pass

    def fail() -> None:
        raise Refused("no")

    async def main() -> None:
        await threads.run(fail)

    with pytest.raises(Refused, match="no"):
        asyncio.run(main())


def test_threads_start_on_demand_up_to_the_count(
    threads: WorkerThreads, started: list[str]
) -> None:
    release = threading.Event()
    inside = threading.Semaphore(0)

    def blocked() -> str:
        inside.release()
        release.wait()
        return _current_name()

    async def main() -> list[str]:
        tasks = [asyncio.ensure_future(threads.run(blocked)) for _ in range(3)]
        # Two run at once (the count); the third waits for one of them.
        for _ in range(2):
            await asyncio.to_thread(inside.acquire)
        assert not inside.acquire(blocking=False)
        release.set()
        return list(await asyncio.gather(*tasks))

    names = asyncio.run(main())
    assert sorted(set(names)) == ["test-worker_0", "test-worker_1"]
    assert sorted(started) == ["test-worker_0", "test-worker_1"]


class _Occupied:
    """Calls that hold the fixture's two threads until :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._inside = threading.Semaphore(0)

    def _blocked(self) -> None:
        self._inside.release()
        self.release.wait()

    async def both(self, threads: WorkerThreads) -> list[asyncio.Task[None]]:
        """Start two blocked calls and return once both threads are inside them."""
        busy = [asyncio.ensure_future(threads.run(self._blocked)) for _ in range(2)]
        for _ in range(2):
            await asyncio.to_thread(self._inside.acquire)
        return busy


def test_a_call_cancelled_before_a_thread_takes_it_never_runs(threads: WorkerThreads) -> None:
    occupied = _Occupied()
    ran: list[str] = []

    async def main() -> None:
        busy = await occupied.both(threads)
        queued = asyncio.ensure_future(threads.run(lambda: ran.append("queued")))
        await asyncio.sleep(0)  # the task reaches its await on the queued call
        queued.cancel()
        occupied.release.set()
        await asyncio.gather(*busy)
        with pytest.raises(asyncio.CancelledError):
            await queued
        # A later call runs after the cancelled one was passed over.
        await threads.run(lambda: ran.append("later"))

    asyncio.run(main())
    assert ran == ["later"]


def test_a_running_call_completes_when_its_task_is_cancelled(threads: WorkerThreads) -> None:
    release = threading.Event()
    inside = threading.Event()
    done: list[str] = []

    def slow() -> None:
        inside.set()
        release.wait()
        done.append("finished")

    async def main() -> None:
        task = asyncio.ensure_future(threads.run(slow))
        await asyncio.to_thread(inside.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()

    asyncio.run(main())
    threads.shutdown()  # joins the thread, so the call has ended
    assert done == ["finished"]


def test_shutdown_lets_queued_calls_finish_then_refuses_new_ones(threads: WorkerThreads) -> None:
    occupied = _Occupied()
    ran: list[int] = []

    async def main() -> None:
        busy = await occupied.both(threads)
        queued = [
            asyncio.ensure_future(threads.run(lambda n=n: ran.append(n)))  # type: ignore[misc]
            for n in range(20)
        ]
        await asyncio.sleep(0)  # every task has queued its call; both threads are busy
        stopping = asyncio.ensure_future(asyncio.to_thread(threads.shutdown))
        assert ran == []
        occupied.release.set()
        await stopping  # returns once the queued calls ran and the threads were joined
        assert sorted(ran) == list(range(20))
        await asyncio.gather(*busy, *queued)
        with pytest.raises(RuntimeError, match="shut down"):
            await threads.run(lambda: ran.append(-1))
        assert -1 not in ran

    asyncio.run(main())


def test_an_unclosed_set_does_not_keep_the_process_alive() -> None:
    script = (
        "import asyncio\n"
        "from treasury_core.worker_threads import BrokenWorkerThreads, WorkerThreads\n"
        "w = WorkerThreads(2, 'left', lambda: None)\n"
        "print(asyncio.run(w.run(lambda: 'ran')), flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr


def test_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        WorkerThreads(0, "none", lambda: None)


def test_a_failing_start_hook_fails_every_call_instead_of_stranding_it() -> None:
    class NoConnection(Exception):
        pass

    def started() -> None:
        raise NoConnection("database down")

    workers = WorkerThreads(1, "broken", started)
    ran: list[str] = []

    async def main() -> None:
        for _ in range(2):
            with pytest.raises(BrokenWorkerThreads) as failed:
                await workers.run(lambda: ran.append("ran"))
            assert isinstance(failed.value.__cause__, NoConnection)

    try:
        asyncio.run(main())
    finally:
        workers.shutdown()
    assert ran == []
