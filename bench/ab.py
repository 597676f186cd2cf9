"""Two versions of the server side by side over HTTP: ``python -m bench.ab A B [options]``.

How the "side by side" figures of CHANGELOG.md's "Performance history" were measured.
``A`` and ``B`` are source trees of this repository (a checkout, ``git worktree add
/tmp/before HEAD~1``, or ``git archive REV | tar -x -C DIR``). Each gets a ``treasury serve``
of its own, started with its tree first on ``PYTHONPATH``, on an SQLite file of its own and set
up as ``python -m bench http`` sets up ours (one intent to read, two funded USD wallets). Then
``wrk`` drives one workload against A and B in turn, ``--rounds`` times, the order alternating
each round so neither always runs first, and the server's CPU per request (``/proc``, all its
threads) is read around every run. Medians are printed, with the paired ratio B/A of each round.

CPU per request moves far less with the machine's other load than the request rate does, which
is why it is the figure these comparisons quote. Needs ``wrk``; everything is on loopback.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from bench import http_intents as h

WORKLOADS = ("create", "read", "balance", "transfer")


@dataclass
class _Side:
    """One server under test and what its runs measured."""

    tree: Path
    pid: int
    url: str
    script: Path
    cpu_us: list[float] = field(default_factory=list)
    rps: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)


def _pythonpath(tree: Path) -> str:
    parts = [tree / "src", tree / "src" / "adapters", tree / "contrib" / "aiohttp_app", tree]
    return os.pathsep.join(str(p) for p in parts)


def _start(
    tree: Path,
    workload: str,
    root: Path,
    stack: ExitStack,
    name: str,
    cli: list[str] | None = None,
) -> _Side:
    """One side's server; ``cli`` (a tree's own installed ``treasury``) or this interpreter's
    CLI with ``tree`` first on ``PYTHONPATH``."""
    env = {"PYTHONPATH": _pythonpath(tree)} if cli is None else {"PYTHONPATH": ""}
    cli = h._treasury_cli() if cli is None else cli
    with mock.patch.dict(os.environ, env):
        database = str(root / f"{name}.db")
        key, account = h._company(cli, database)
        port = h.free_port()
        args = [*cli, "serve", "--port", str(port), "--database", database]
        proc = stack.enter_context(h.run_server(args, port, root / f"{name}.log"))
    base = f"http://127.0.0.1:{port}"
    url, text = h.our_requests(base, h._set_up_ours(base, key, account))[workload]
    script = root / f"{name}.lua"
    script.write_text(text)
    return _Side(tree, proc.pid, url, script)


def _run(side: _Side, seconds: float) -> None:
    hz = os.sysconf("SC_CLK_TCK")
    h._quiet([side.pid])
    before = h._cpu_ticks([side.pid])
    run = h._wrk(side.url, side.script, seconds)
    after = h._cpu_ticks([side.pid])
    if run.errors:
        raise RuntimeError(f"{side.tree}: {run.errors} failed requests")
    side.cpu_us.append((after - before) / hz / run.requests * 1e6)
    side.rps.append(run.rps)
    side.p99_ms.append(run.p99_ms)


def compare(
    a: Path,
    b: Path,
    workload: str,
    rounds: int = 8,
    seconds: float = 3.0,
    clis: tuple[list[str], list[str]] | None = None,
) -> tuple[_Side, _Side]:
    """Both servers measured ``rounds`` times each, interleaved, after one warm-up run each;
    ``clis``: each side's own ``treasury`` command (see ``_start``)."""
    problem = h.wrk_problem()
    if problem is not None:
        raise RuntimeError(problem)
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        pairs = ((a, "a", clis[0] if clis else None), (b, "b", clis[1] if clis else None))
        sides = [_start(tree, workload, root, stack, name, cli) for tree, name, cli in pairs]
        for side in sides:
            h._wrk(side.url, side.script, 2)  # warm-up, not counted
        for n in range(rounds):
            for side in sides if n % 2 == 0 else sides[::-1]:
                _run(side, seconds)
    return sides[0], sides[1]


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, compare, print the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path, help="source tree A (the reference)")
    parser.add_argument("b", type=Path, help="source tree B (the change)")
    parser.add_argument("--workload", choices=WORKLOADS, default="read")
    parser.add_argument("--rounds", type=int, default=8, help="runs of each side (default 8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="each run's length (whole s)")
    args = parser.parse_args(argv)
    for tree in (args.a, args.b):
        if not (tree / "src" / "treasury_core").is_dir():
            parser.error(f"{tree} is not a source tree of this repository (no src/treasury_core)")
    a, b = compare(args.a, args.b, args.workload, args.rounds, args.seconds)
    for name, side in (("A", a), ("B", b)):
        print(
            f"{name} {side.tree}: {args.workload}, server CPU per request median"
            f" {statistics.median(side.cpu_us):.1f} us (min {min(side.cpu_us):.1f}),"
            f" {statistics.median(side.rps):,.0f} req/s,"
            f" p99 {statistics.median(side.p99_ms):.1f} ms"
        )
    paired = [y / x for x, y in zip(a.cpu_us, b.cpu_us, strict=True)]
    print(
        f"B/A server CPU per request, median of {len(paired)} paired rounds: "
        f"{statistics.median(paired):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
