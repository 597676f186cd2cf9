"""Two peer double-entry ledgers on the standard ledger workload: django-hordak, python-accounting.

The workload is :mod:`bench.ledger_plan`: ``WALLETS`` USD wallets, each funded (untimed), then
``count`` transfers between them replayed from the same seeded sequence ours replays, each its
own database transaction, then every wallet's balance read once, and the balances checked
against :func:`bench.ledger_plan.expected_balances`. Each peer runs the workload the way its
documentation shows (see the scripts' docstrings for exactly which calls), durably as ours is:

- django-hordak (``peer_scripts/hordak_ledger.py``): ``Account.transfer_to`` on PostgreSQL, the
  same server our PostgreSQL rows use, in a database of its own, so with the same
  ``synchronous_commit`` (reported; ``on`` by default);
- python-accounting (``peer_scripts/accounting_ledger.py``): a posted Journal Entry per transfer
  on an SQLite file with ``journal_mode=WAL`` and ``synchronous=FULL``, as our SQLite storage.

Each peer's code runs only in a subprocess with its own venv's interpreter (``bench/peers.py``);
nothing of it is imported here. Every repetition is a fresh process on a fresh database (setup,
then the timed transfers and reads), so each is a whole measurement and none sees another's
history. The peers are far slower than ours, so they run fewer transfers than the issue's
20,000: the defaults keep each peer to about half a minute (setup included) on two cores. Both
peers slow down as their history grows, so their rates at these counts flatter them, if
anything, against a longer run.

``python -m bench.peer_ledgers [--count N] [--reps R]`` runs both and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import peers
from bench.ledger_plan import WALLETS
from bench.timing import Elapsed, Samples

#: The scripts that run inside the peers' venvs.
SCRIPTS = Path(__file__).resolve().parent / "peer_scripts"
#: The workload definition the scripts replay (passed to them by path).
PLAN = Path(__file__).resolve().parent / "ledger_plan.py"
#: Default transfers per repetition. Measured on two idle-ish cores at about 140-460 transfers/s
#: for hordak and 65-95 for python-accounting (fewer as their history grows; a third of that
#: on a machine loaded by other benchmarks), plus 4-7 s (hordak: Django start-up and its
#: migrations) or 2-4 s of start-up and setup per run: three repetitions of each peer take
#: 15-30 s, and stay under a minute on a machine twice as busy.
HORDAK_TRANSFERS = 500
ACCOUNTING_TRANSFERS = 300
#: Default repetitions (the figures are medians).
REPS = 3
#: A run is stopped after this many seconds plus this many per transfer (about 6 transfers/s,
#: a tenth of the slower peer's idle rate), so a stuck peer costs at most ``reps`` times that.
RUN_TIMEOUT_BASE = 30.0
RUN_TIMEOUT_PER_TRANSFER = 0.15


@dataclass(frozen=True, slots=True)
class PeerRun:
    """One repetition as the peer's script reported it."""

    transfers: int
    transfer_seconds: float
    transfer_cpu_seconds: float
    read_seconds: float
    setup_seconds: float
    balances_ok: bool

    @property
    def rate(self) -> float:
        """Transfers per second (wall clock)."""
        return self.transfers / self.transfer_seconds


@dataclass(frozen=True, slots=True)
class PeerRuns:
    """One peer's repetitions of the ledger workload."""

    #: The peer's name (``hordak`` or ``accounting``).
    peer: str
    #: Transfers per repetition.
    count: int
    #: Each repetition, in order.
    runs: tuple[PeerRun, ...]
    #: Transfers per second, one per repetition.
    rates: tuple[float, ...]
    #: The median of ``rates``.
    median_rate: float
    #: The median wall-clock seconds to read all ``WALLETS`` balances once.
    median_read_seconds: float
    #: Whether every repetition's balances matched ``expected_balances(count)``.
    balances_ok: bool
    #: Package versions (and the database's) the peer ran with.
    versions: dict[str, str]
    #: The database's durability settings as the peer's connection saw them.
    durability: dict[str, str]

    @property
    def samples(self) -> Samples:
        """The transfers as :class:`bench.timing.Samples`, for :mod:`bench.report`'s helpers."""
        runs = tuple(Elapsed(r.transfer_seconds, r.transfer_cpu_seconds) for r in self.runs)
        return Samples(self.count, runs)


def _run_script(python: Path, script: Path, args: list[str], timeout: float) -> dict[str, Any]:
    """Run ``script`` once with the peer's ``python``; its JSON line, parsed.

    Raises ``RuntimeError`` with the script's stderr if it fails, prints no JSON, or outlives
    ``timeout`` (then it is sent SIGTERM, which it turns into a clean exit, and killed if that
    does not end it within ten seconds).
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    command = [str(python), str(script), "--plan", str(PLAN), *args]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                stdout, stderr = process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, stderr = process.communicate()
            raise RuntimeError(
                f"{script.name} {' '.join(args)} took over {timeout:.0f}s:\n{stderr}"
            ) from None
    lines = stdout.strip().splitlines()
    if process.returncode != 0 or not lines:
        raise RuntimeError(
            f"{script.name} {' '.join(args)} failed (exit {process.returncode}):\n{stderr}"
        )
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise RuntimeError(
            f"{script.name} printed no JSON result ({exc}):\n{stdout}\n{stderr}"
        ) from None
    return result


def _bench(peer: peers.Peer, script: str, count: int, reps: int, args: list[str]) -> PeerRuns:
    if count < 1 or reps < 1:
        raise ValueError("count and reps must be positive")
    python = peers.ensure(peer)
    timeout = RUN_TIMEOUT_BASE + RUN_TIMEOUT_PER_TRANSFER * count
    results = [
        _run_script(python, SCRIPTS / script, ["--count", str(count), *args], timeout)
        for _ in range(reps)
    ]
    runs = tuple(
        PeerRun(
            transfers=int(r["transfers"]),
            transfer_seconds=float(r["transfer_seconds"]),
            transfer_cpu_seconds=float(r["transfer_cpu_seconds"]),
            read_seconds=float(r["read_seconds"]),
            setup_seconds=float(r["setup_seconds"]),
            balances_ok=bool(r["balances_ok"]),
        )
        for r in results
    )
    rates = tuple(run.rate for run in runs)
    return PeerRuns(
        peer=peer.name,
        count=count,
        runs=runs,
        rates=rates,
        median_rate=statistics.median(rates),
        median_read_seconds=statistics.median(run.read_seconds for run in runs),
        balances_ok=all(run.balances_ok for run in runs),
        versions={str(k): str(v) for k, v in results[-1]["versions"].items()},
        durability={str(k): str(v) for k, v in results[-1]["durability"].items()},
    )


def bench_hordak(count: int, reps: int, postgres_url: str) -> PeerRuns:
    """django-hordak on the PostgreSQL server at ``postgres_url``: ``reps`` fresh databases.

    Installs hordak's venv first if needed; raises ``RuntimeError`` if that or a run fails.
    """
    return _bench(peers.HORDAK, "hordak_ledger.py", count, reps, ["--postgres-url", postgres_url])


def bench_accounting(count: int, reps: int) -> PeerRuns:
    """python-accounting on a fresh SQLite file (WAL, synchronous=FULL) per repetition.

    Installs its venv first if needed; raises ``RuntimeError`` if that or a run fails.
    """
    return _bench(peers.ACCOUNTING, "accounting_ledger.py", count, reps, [])


def describe(result: PeerRuns) -> list[str]:
    """Human-readable lines for one peer's figures."""
    rates = ", ".join(f"{rate:,.0f}" for rate in result.rates)
    setup = statistics.median(run.setup_seconds for run in result.runs)
    cpu_us = result.samples.median_cpu_us
    return [
        f"{result.peer}: {result.count:,} transfers x {len(result.runs)} runs",
        f"  transfers/s: median {result.median_rate:,.1f} (runs: {rates});"
        f" client CPU {cpu_us:,.0f} us/transfer",
        f"  read {WALLETS} balances: median {result.median_read_seconds:.3f} s;"
        f" setup median {setup:.1f} s",
        f"  balances ok: {'yes' if result.balances_ok else 'NO'}",
        f"  versions: {', '.join(f'{k} {v}' for k, v in result.versions.items())}",
        f"  durability: {', '.join(f'{k}={v}' for k, v in result.durability.items())}",
    ]


def main(argv: list[str] | None = None) -> int:
    """Run both peers (or one) and print their figures; exit 1 if one failed or was wrong."""
    from bench import fixtures

    parser = argparse.ArgumentParser(prog="python -m bench.peer_ledgers", description=__doc__)
    parser.add_argument(
        "--count",
        type=int,
        default=None,
        help=f"transfers per run (default: hordak {HORDAK_TRANSFERS}, "
        f"python-accounting {ACCOUNTING_TRANSFERS})",
    )
    parser.add_argument("--reps", type=int, default=REPS, help="runs per peer")
    parser.add_argument("--postgres-url", default=fixtures.POSTGRES_URL, help="for hordak")
    parser.add_argument("--only", choices=("hordak", "accounting"), help="run one peer")
    args = parser.parse_args(argv)
    status = 0
    jobs: dict[str, Callable[[], PeerRuns]] = {
        "hordak": lambda: bench_hordak(
            args.count or HORDAK_TRANSFERS, args.reps, args.postgres_url
        ),
        "accounting": lambda: bench_accounting(args.count or ACCOUNTING_TRANSFERS, args.reps),
    }
    for name, job in jobs.items():
        if args.only not in (None, name):
            continue
        if name == "hordak" and (problem := fixtures.postgres_available(args.postgres_url)):
            print(f"hordak: skipped, PostgreSQL unreachable: {problem}")
            status = 1
            continue
        start = time.perf_counter()
        try:
            result = job()
        except RuntimeError as exc:
            print(f"{name}: FAILED: {exc}")
            status = 1
            continue
        print("\n".join(describe(result)))
        print(f"  total {time.perf_counter() - start:.1f} s", flush=True)
        status |= 0 if result.balances_ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
