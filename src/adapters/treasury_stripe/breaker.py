"""A circuit breaker: after a run of failures that say Stripe cannot be reached, stop calling it
for a while, so that requests fail at once instead of each waiting out its timeouts.

Rules:

- **Closed** (the start): every call is let through. A failure counts; any other outcome resets
  the count. ``failure_threshold`` failures in a row open the breaker.
- **Open**: no call is let through for ``cooldown_seconds``.
- **Half-open**: after the cool-down the next call is let through alone, as a trial; the others
  are still refused while it runs. Its success closes the breaker, its failure opens it again
  for another cool-down. A trial that never ran (cancelled before a thread took it) leaves
  the breaker open with its cool-down over, so the next call is the trial.
- Outcomes of calls let through before the breaker last changed state are ignored: a call
  started before it opened says nothing about Stripe now.

What is a failure is the caller's to say (:func:`treasury_stripe.errors.unreachable`). Time is
real monotonic time (``time.monotonic``; injectable for tests), not the treasury's clock: the
cool-down is about the network's health, and business time may be moved by hand in the sandbox.

Thread-safe: calls are admitted on the event loop and finish on the provider's worker threads,
so every method takes one lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger("treasury.stripe")

#: Failures in a row that open the breaker.
FAILURE_THRESHOLD = 5
#: Seconds the breaker stays open before it lets a trial call through.
COOLDOWN_SECONDS = 30.0


class BreakerState(StrEnum):
    """Where a :class:`CircuitBreaker` stands (see the module's rules)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Admission:
    """The breaker's leave for one call; its outcome is recorded with it."""

    #: The breaker's state changes when it was given; an outcome counts only if none since.
    generation: int
    #: Whether this call is the half-open breaker's one trial.
    trial: bool


class CircuitBreaker:
    """Counts a provider's consecutive failures and refuses calls while it is open."""

    def __init__(
        self,
        *,
        failure_threshold: int = FAILURE_THRESHOLD,
        cooldown_seconds: float = COOLDOWN_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if not cooldown_seconds >= 0:
            raise ValueError("cooldown_seconds must be 0 or more")
        self._threshold = failure_threshold
        self._cooldown = cooldown_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._generation = 0
        self._failures = 0
        self._opened_at = 0.0

    @property
    def state(self) -> BreakerState:
        """The state as of the last call or outcome (an open breaker whose cool-down is over
        reads open until a call is admitted as its trial)."""
        with self._lock:
            return self._state

    def admit(self) -> Admission | None:
        """Leave for one call, or ``None`` when the breaker refuses it (open, or half-open with
        its trial under way). A call admitted must have its outcome recorded, or be
        :meth:`abandon`-ed if it never ran."""
        with self._lock:
            if self._state is BreakerState.CLOSED:
                return Admission(self._generation, trial=False)
            if self._state is BreakerState.HALF_OPEN:
                return None
            if self._monotonic() - self._opened_at < self._cooldown:
                return None
            self._move(BreakerState.HALF_OPEN)
            return Admission(self._generation, trial=True)

    def record(self, admission: Admission, *, failed: bool) -> None:
        """The outcome of an admitted call: ``failed`` when it says Stripe cannot be reached."""
        with self._lock:
            if admission.generation != self._generation:
                return
            if admission.trial:
                if failed:
                    self._open()
                else:
                    log.warning("Stripe answered again: the circuit breaker is closed")
                    self._move(BreakerState.CLOSED)
                return
            if not failed:
                self._failures = 0
                return
            self._failures += 1
            if self._failures >= self._threshold:
                self._open()

    def abandon(self, admission: Admission) -> None:
        """An admitted call that never ran: a trial's turn goes to the next call."""
        with self._lock:
            if admission.trial and admission.generation == self._generation:
                # Open again with the same opening time: its cool-down is already over.
                self._move(BreakerState.OPEN)

    def _open(self) -> None:
        log.warning(
            "Stripe unreachable or failing: the circuit breaker is open, calls fail at once "
            "for %g s",
            self._cooldown,
        )
        self._opened_at = self._monotonic()
        self._move(BreakerState.OPEN)

    def _move(self, state: BreakerState) -> None:
        self._state = state
        self._generation += 1
        self._failures = 0
