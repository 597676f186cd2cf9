"""Calling a treasury from synchronous code (Django, Flask, scripts, worker threads).

:class:`BlockingTreasury` owns one event loop running in a daemon thread, builds (or adopts) a
:class:`~treasury_core.Treasury` on it, and lets any number of threads call its services and
block until each call is done::

    with BlockingTreasury(lambda: bootstrap(config)) as treasury:
        created = treasury.companies.create_company("Acme")
        wallet = treasury.wallets.create(created.company.id, CreateWalletRequest(...))

Why one hosted loop rather than ``asyncio.run()`` per call: a treasury's objects are bound to the
loop that first used them. The payment service serialises calls on an intent with
``asyncio.Lock`` objects, which belong to one loop; the SQLite adapter answers its group writer's
callers on the loop each call came from and keeps a connection for the loop's thread; a fresh
loop per call would also pay loop start-up on every call. One loop, in one thread, is the
arrangement the async services were written for; the calling threads only wait.

Semantics, in brief:

- Every call runs on the hosted loop; the calling thread blocks until it finishes. Calls from
  several threads run concurrently on that loop, exactly as concurrent tasks would.
- Exceptions come back as they were raised: a :class:`~treasury_core.InsufficientFunds` is
  raised in the calling thread as that same :class:`~treasury_core.InsufficientFunds`.
- ``timeout`` bounds the wait, not the work: on :class:`TimeoutError` the call goes on to its
  end on the loop (cancelling a payment between the provider's answer and the commit would
  leave the two disagreeing). Retry with an idempotency key if you must know.
- Calling the blocking API from a coroutine on the hosted loop itself would wait for itself
  forever, so it raises :class:`RuntimeError` instead; code on that loop awaits the services.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel

from treasury_core.bootstrap import Treasury

__all__ = ["BlockingProxy", "BlockingTreasury"]

P = ParamSpec("P")
T = TypeVar("T")


class BlockingTreasury:
    """A :class:`~treasury_core.Treasury` on a private event loop, callable from any thread.

    ``source`` is either a function that builds the treasury (run on the hosted loop's thread,
    so everything the treasury creates belongs there; ``functools.partial(bootstrap, config)``)
    or an already built treasury that no other event loop uses. With ``close_treasury`` (the
    default) :meth:`close` closes the treasury too. ``timeout`` (seconds) bounds each call's
    wait; ``None`` waits as long as the call takes.

    The treasury's services appear as attributes: ``blocking.wallets.create(...)`` runs
    ``treasury.wallets.create(...)`` on the loop and returns its result. Those proxies are typed
    ``Any``; :meth:`call` is the typed route (``blocking.call(t.wallets.create, ...)`` with
    ``t = blocking.treasury``).
    """

    def __init__(
        self,
        source: Treasury | Callable[[], Treasury],
        *,
        close_treasury: bool = True,
        timeout: float | None = None,
        thread_name: str = "treasury-loop",
    ) -> None:
        self._timeout = timeout
        self._close_treasury = close_treasury
        self._lock = threading.Lock()
        # Held for the whole of close(): a second closer waits for the first, and a close that
        # failed half-way (Ctrl-C while waiting) can be tried again.
        self._close_lock = threading.Lock()
        self._closing = False  # no new calls once set
        self._closed = False  # set once close() has finished
        self._in_flight: set[concurrent.futures.Future[Any]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=thread_name, daemon=True)
        self._thread.start()
        try:
            if isinstance(source, Treasury):
                self._treasury = source
            else:
                self._treasury = self._submit(_invoke(source, (), {})).result()
        except BaseException:
            self._stop_loop()
            raise

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    # --- what callers use ----------------------------------------------------------------------

    @property
    def treasury(self) -> Treasury:
        """The hosted treasury, for :meth:`call` (its coroutines must run on :attr:`loop`)."""
        return self._treasury

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The hosted event loop, for scheduling other work beside the treasury's."""
        return self._loop

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called (new calls are refused from then on)."""
        return self._closing

    def call(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``await fn(*args, **kwargs)`` on the hosted loop and return its result.

        Whatever ``fn`` raises is raised here, as the same exception.
        """
        result: T = self._wait(self._submit(_invoke(fn, args, kwargs)))
        return result

    def run(self, coro: Coroutine[Any, Any, T], /) -> T:
        """Run a coroutine object on the hosted loop and return its result.

        For coroutines made by the hosted treasury (``blocking.run(t.wallets.get(1, w))``);
        nothing of it runs until it is on the loop.
        """
        return self._wait(self._submit(coro))

    def __getattr__(self, name: str) -> Any:
        """``blocking.wallets`` and the other services of the treasury, as blocking proxies.

        ``config`` and other plain data come back as they are.
        """
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._treasury, name)
        if isinstance(value, BaseModel):
            return value  # immutable configuration: nothing to run on the loop
        return BlockingProxy(self, value)

    def close(self) -> None:
        """Wait for calls in flight, close the treasury (unless told not to), stop the loop.

        Work scheduled on :attr:`loop` by other means (a background task started with
        ``asyncio.run_coroutine_threadsafe``) should be stopped by its owner first; whatever is
        still running then is cancelled and awaited before the treasury closes, so nothing is
        left using closed storage. Idempotent; a close that was interrupted can be called
        again. Calls made after it raise :class:`RuntimeError`.
        """
        self._refuse_on_loop_thread()
        with self._close_lock:
            if self._closed:
                return
            if self._loop.is_closed():  # an earlier close() stopped the loop, then failed
                self._closed = True
                return
            with self._lock:
                self._closing = True
                in_flight = list(self._in_flight)
            # Calls other threads already started finish (their callers are told their
            # outcome); nothing of ours is cancelled halfway through a movement.
            concurrent.futures.wait(in_flight)
            try:
                asyncio.run_coroutine_threadsafe(_cancel_other_tasks(), self._loop).result()
                if self._close_treasury:
                    done: concurrent.futures.Future[None] = concurrent.futures.Future()

                    def close_on_loop() -> None:
                        # The storage's threads and connections were made for this loop's
                        # thread.
                        try:
                            self._treasury.close()
                            done.set_result(None)
                        except BaseException as exc:
                            done.set_exception(exc)

                    self._loop.call_soon_threadsafe(close_on_loop)
                    done.result()
            finally:
                self._stop_loop()
            self._closed = True

    def __enter__(self) -> BlockingTreasury:
        """Use it as a context manager: :meth:`close` on the way out."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close on leaving the ``with`` block, whether or not it raised."""
        self.close()

    # --- the plumbing ----------------------------------------------------------------------------

    def _refuse_on_loop_thread(self) -> None:
        if threading.current_thread() is self._thread:
            raise RuntimeError(
                "BlockingTreasury called from its own event loop: it would wait for itself. "
                "Code running on that loop awaits the services directly."
            )

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        try:
            self._refuse_on_loop_thread()
            with self._lock:
                if self._closing:
                    raise RuntimeError("BlockingTreasury is closed")
                future = asyncio.run_coroutine_threadsafe(coro, self._loop)
                self._in_flight.add(future)
        except BaseException:
            coro.close()  # never awaited: close it so Python does not warn about it
            raise
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._in_flight.discard(future)

    def _wait(self, future: concurrent.futures.Future[T]) -> T:
        # The future's result() re-raises the coroutine's own exception object, type and all.
        return future.result(timeout=self._timeout)

    def _stop_loop(self) -> None:
        async def shutdown() -> None:
            await self._loop.shutdown_asyncgens()
            await self._loop.shutdown_default_executor()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


class BlockingProxy:
    """One of a :class:`BlockingTreasury`'s services, with every method made blocking.

    A method called through the proxy runs on the hosted loop; a coroutine it returns is awaited
    there. Attributes that are not callable come back as they are.
    """

    def __init__(self, owner: BlockingTreasury, target: object) -> None:
        self._owner = owner
        self._target = target

    def __getattr__(self, name: str) -> Any:
        """The target's attribute; a method comes back as a blocking function."""
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._target, name)
        if not callable(value):
            return value
        owner = self._owner

        @functools.wraps(value)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return owner._wait(owner._submit(_invoke(value, args, kwargs)))

        return blocking

    def __repr__(self) -> str:
        """Say what is being proxied."""
        return f"<BlockingProxy of {self._target!r}>"


async def _invoke(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # Sync methods run on the loop's thread too: the treasury's state is touched by one thread.
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _cancel_other_tasks() -> None:
    """Cancel every task on this loop but the running one, and wait for them to end."""
    current = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not current]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
