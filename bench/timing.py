"""Timing helpers: interleaved repetitions, medians and paired ratios."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Elapsed:
    """One timed run: wall-clock seconds and this process's CPU seconds (user + system)."""

    wall: float
    cpu: float


#: A timed workload: does ``count`` operations and returns how long they took.
Workload = Callable[[int], Elapsed]


@dataclass(frozen=True, slots=True)
class Samples:
    """One workload's timings per repetition, each for ``count`` operations."""

    count: int
    runs: tuple[Elapsed, ...]

    @property
    def seconds(self) -> list[float]:
        """Wall-clock seconds, one per repetition."""
        return [r.wall for r in self.runs]

    @property
    def rates(self) -> list[float]:
        """Operations per second, one per repetition."""
        return [self.count / r.wall for r in self.runs]

    @property
    def median_rate(self) -> float:
        """The median of the per-repetition rates (operations per second)."""
        return statistics.median(self.rates)

    @property
    def median_us(self) -> float:
        """The median wall-clock cost of one operation, in microseconds."""
        return statistics.median(self.seconds) / self.count * 1e6

    @property
    def median_cpu_us(self) -> float:
        """The median CPU time this process spent per operation, in microseconds.

        Wall time minus this is time spent waiting: on the database server, on the disk, or for
        a CPU taken by other work on the machine.
        """
        return statistics.median(r.cpu for r in self.runs) / self.count * 1e6


def timed(fn: Callable[[], object], count: int) -> Elapsed:
    """Call ``fn`` ``count`` times; the elapsed wall-clock and CPU seconds."""
    cpu = time.process_time()
    start = time.perf_counter()
    for _ in range(count):
        fn()
    return Elapsed(time.perf_counter() - start, time.process_time() - cpu)


def interleave(workloads: Mapping[str, Workload], count: int, reps: int) -> dict[str, Samples]:
    """Run every workload once per repetition, in turn (A, B, A, B, ...), after one warm-up each.

    The warm-up (a tenth of ``count``) fills caches, prepares statements and opens pools so the
    timed repetitions measure the steady state.
    """
    for run in workloads.values():
        run(max(1, count // 10))
    runs: dict[str, list[Elapsed]] = {name: [] for name in workloads}
    for _ in range(reps):
        for name, run in workloads.items():
            runs[name].append(run(count))
    return {name: Samples(count, tuple(values)) for name, values in runs.items()}


def paired_ratios(numerator: Samples, denominator: Samples) -> list[float]:
    """Per-repetition rate ratios of two interleaved workloads (same repetition, same noise)."""
    return [a / b for a, b in zip(numerator.rates, denominator.rates, strict=True)]
