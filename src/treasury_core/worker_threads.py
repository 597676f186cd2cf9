"""Worker threads that run blocking calls for an event loop: the storage's hop off the loop.

What :meth:`asyncio.loop.run_in_executor` over a ``ThreadPoolExecutor`` does, with less on the
way: a job is a tuple on a ``SimpleQueue``, and its result goes straight to the asyncio future
by one ``call_soon_threadsafe``, where the executor also builds, locks and chains a
``concurrent.futures.Future`` per call. Every storage call on PostgreSQL makes this hop, and
with several workers sharing the GIL its cost was a visible share of a transfer's client time
(docs/performance.md, "Transfers with 8 workers against raw psycopg").

The executor's rules are kept: threads start on demand up to ``count`` (one per call that
finds none idle), each running ``started`` first (if that raises, every call fails with
:class:`BrokenWorkerThreads`, as a broken executor's do); a call cancelled before a thread took
it is never run, one already running completes; :meth:`shutdown` lets queued calls finish, then
stops and joins every thread, and so does the interpreter's exit for any set left running
(the threads are daemons, so that an unclosed set cannot keep the process alive; the exit
hook drains them first, as the executor's does).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

#: A queued call: the loop and future to answer, and the call. ``None`` stops a thread.
_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]] | None


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    # On the loop's thread. The awaiting task may have been cancelled meanwhile.
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _answer(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], call: Callable[[], Any]
) -> None:
    # Reading the future's state off its loop is a plain attribute read; at worst a call
    # cancelled at this very moment still runs, as with an executor's running call.
    if future.cancelled():
        return
    value: Any = None
    error: BaseException | None = None
    try:
        value = call()
    except BaseException as exc:  # handed to the awaiting task, as an executor does
        error = exc
    # A loop closed while the call ran has nobody waiting on it.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, future, value, error)


class BrokenWorkerThreads(RuntimeError):
    """A worker thread's ``started`` hook raised; the error is the ``__cause__``."""


def _failing(error: BaseException) -> Callable[[], Any]:
    def fail() -> Any:
        raise BrokenWorkerThreads("a storage worker thread failed to start") from error

    return fail


#: Every set with threads, for the exit hook.
_LIVE: weakref.WeakSet[WorkerThreads] = weakref.WeakSet()


@atexit.register
def _shut_down_all() -> None:
    for threads in list(_LIVE):
        threads.shutdown()


class WorkerThreads:
    """Up to ``count`` threads named ``{name}_{n}`` running calls for event loops."""

    def __init__(self, count: int, name: str, started: Callable[[], None]) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self._count = count
        self._name = name
        self._started = started
        self._queue: SimpleQueue[_Job] = SimpleQueue()
        # Released by a thread each time it goes back to waiting: a call that can take one
        # needs no new thread.
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        #: Set when a thread's ``started`` hook raised: every call fails with it from then on.
        self._broken: BaseException | None = None

    async def run(self, call: Callable[[], T]) -> T:
        """``call()`` on one of the threads; its result or its exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:  # so that a concurrent shutdown cannot strand the call in the queue
            if self._broken is not None:
                raise BrokenWorkerThreads(
                    "a storage worker thread failed to start"
                ) from self._broken
            if self._closed:
                raise RuntimeError("the worker threads have been shut down")
            self._queue.put((loop, future, call))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._count:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                _LIVE.add(self)
                thread.start()
        return await future

    def _work(self) -> None:
        try:
            self._started()
        except BaseException as exc:  # as a broken executor: every call fails from now on
            self._broken = exc
        queue = self._queue
        while True:
            job = queue.get()
            if job is None:
                return
            loop, future, call = job
            if self._broken is not None:
                call = _failing(self._broken)
            _answer(loop, future, call)
            del job, future, call  # nothing of a finished call is kept while the thread waits
            self._idle.release()

    def shutdown(self) -> None:
        """Let queued calls finish, then stop and join every thread. Idempotent."""
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
        _LIVE.discard(self)
        for _ in threads:
            self._queue.put(None)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:  # shut down from one of its own calls: it ends after it
                thread.join()
