"""``python -m bench``: run every benchmark and print the results table.

Defaults keep the whole run to about four minutes on two cores; ``--quick`` is a smoke run.
``python -m bench http`` runs only the HTTP create-intent rows (about a minute; needs ``wrk``).
Progress goes to stderr, the machine description and the table to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench import fixtures, http_intents, kernel, machine, movements, reads, transfers
from bench.report import Row, cost, cpu, rate, ratio, render, verdict
from bench.timing import Samples

#: SqlStorage movements must reach these fractions of the raw driver's rate.
SQLITE_TARGET = 0.50
POSTGRES_TARGET = 0.80
#: A balance read at the large history may cost at most this multiple of the small one ...
READ_GROWTH_TARGET = 1.2
#: ... and under this many microseconds.
READ_COST_TARGET_US = 1000.0
#: Create-intent over HTTP: at least this share of a bare aiohttp handler's rate, this many
#: requests per second, and this p99 latency (milliseconds).
HTTP_SHARE_TARGET = 0.15
HTTP_RATE_TARGET = 3000.0
HTTP_P99_TARGET_MS = 20.0


@dataclass(frozen=True, slots=True)
class Options:
    """Counts for one run."""

    reps: int
    kernel_ops: int
    movements: int
    transfers: int
    reads: int
    small: int
    large: int
    postgres: bool
    markdown: bool
    suite: str
    http_seconds: float
    http_reps: int


def parse(argv: list[str] | None) -> Options:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "suite",
        nargs="?",
        choices=("all", "http"),
        default="all",
        help="all benchmarks (default), or only the HTTP create-intent rows",
    )
    parser.add_argument("--reps", type=int, default=7, help="timed repetitions (>= 3)")
    parser.add_argument("--kernel-ops", type=int, default=20_000, help="in-memory ops per rep")
    parser.add_argument("--movements", type=int, default=2_000, help="SQL movements per rep")
    parser.add_argument(
        "--transfers", type=int, default=1_000, help="service transfers per rep and workload"
    )
    parser.add_argument("--reads", type=int, default=2_000, help="balance reads per rep")
    parser.add_argument("--small", type=int, default=1_000, help="postings, small history")
    parser.add_argument("--large", type=int, default=100_000, help="postings, large history")
    parser.add_argument("--http-seconds", type=float, default=4.0, help="wrk seconds per HTTP run")
    parser.add_argument(
        "--http-reps", type=int, default=3, help="HTTP repetitions (>= 3; each is 4 runs)"
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL rows")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--quick", action="store_true", help="a smoke run with small counts")
    args = parser.parse_args(argv)
    if args.reps < 3 or args.http_reps < 3:
        parser.error("--reps and --http-reps must be at least 3 (the figures are medians)")
    if args.quick:
        args.kernel_ops, args.movements, args.reads, args.large = 2_000, 200, 200, 10_000
        args.transfers = 50
        args.http_seconds = 1.0
    return Options(
        reps=args.reps,
        kernel_ops=args.kernel_ops,
        movements=args.movements,
        transfers=args.transfers,
        reads=args.reads,
        small=args.small,
        large=args.large,
        postgres=not args.no_postgres,
        markdown=args.markdown,
        suite=args.suite,
        http_seconds=args.http_seconds,
        http_reps=args.http_reps,
    )


def _step(label: str, fn: Callable[[], dict[str, Samples]]) -> dict[str, Samples]:
    print(f"... {label}", end="", file=sys.stderr, flush=True)
    start = time.perf_counter()
    result = fn()
    print(f" {time.perf_counter() - start:.1f}s", file=sys.stderr, flush=True)
    return result


def kernel_rows(opts: Options) -> list[Row]:
    """The kernel and memory-storage rows."""
    r = _step("kernel + MemoryStorage", lambda: kernel.bench_kernel(opts.kernel_ops, opts.reps))
    return [
        Row(
            "Kernel: plan_journal + apply_plan, 2-account Move", rate(r["kernel"]), cpu(r["kernel"])
        ),
        Row(
            "MemoryStorage.run_sync movement",
            rate(r["memory"]),
            cpu(r["memory"]),
            f"{ratio(r['memory'], r['kernel']):.2f} of kernel",
        ),
    ]


def movement_rows(
    backend: str, raw_name: str, samples: dict[str, Samples], target: float
) -> list[Row]:
    """``SqlStorage`` and raw-driver movement rows for one backend."""
    share = ratio(samples["ours"], samples["raw"])
    return [
        Row(
            f"{backend}: raw {raw_name} movement (2 UPDATE + INSERT)",
            rate(samples["raw"]),
            cpu(samples["raw"]),
        ),
        Row(
            f"{backend}: SqlStorage.run_sync movement",
            rate(samples["ours"]),
            cpu(samples["ours"]),
            f"{share:.2f} of raw",
            f">= {target:.2f} of raw",
            verdict(share >= target),
        ),
    ]


#: The transfer workloads: key suffix, label, and what the raw side does per transfer.
TRANSFER_KINDS = (
    ("same", "same currency", "2 SELECT, 2 UPDATE, 3 INSERT"),
    ("fx", "FX, created pending", "2 SELECT, 4 UPDATE, 6 INSERT"),
)


def transfer_rows(backend: str, raw_name: str, samples: dict[str, Samples]) -> list[Row]:
    """``transfers.create`` and raw-driver transfer rows for one backend (no target: a report)."""
    rows: list[Row] = []
    for key, label, work in TRANSFER_KINDS:
        ours, raw = samples[f"ours_{key}"], samples[f"raw_{key}"]
        rows += [
            Row(f"{backend}: raw {raw_name} transfer, {label} ({work})", rate(raw), cpu(raw)),
            Row(
                f"{backend}: transfers.create, {label}",
                rate(ours),
                cpu(ours),
                f"{ratio(ours, raw):.2f} of raw",
            ),
        ]
    return rows


def read_rows(backend: str, opts: Options, samples: dict[str, Samples]) -> list[Row]:
    """Balance-read rows at the small and large histories for one backend."""
    growth = ratio(samples["large"], samples["small"], of_cost=True)
    large_us = samples["large"].median_us
    met = growth <= READ_GROWTH_TARGET and large_us < READ_COST_TARGET_US
    return [
        Row(
            f"{backend}: balance read, {opts.small:,} postings",
            cost(samples["small"]),
            cpu(samples["small"]),
        ),
        Row(
            f"{backend}: balance read, {opts.large:,} postings",
            cost(samples["large"]),
            cpu(samples["large"]),
            f"{growth:.2f}x small",
            f"<= {READ_GROWTH_TARGET}x, < 1 ms",
            verdict(met),
        ),
        Row(
            f"{backend}: raw driver read, {opts.large:,} postings",
            cost(samples["raw"]),
            cpu(samples["raw"]),
            f"ours {ratio(samples['large'], samples['raw'], of_cost=True):.2f}x raw",
        ),
    ]


def _http_figure(runs: http_intents.Runs) -> str:
    rates = [r.rps for r in runs.runs]
    return f"{runs.rps:,.0f} req/s ({min(rates):,.0f}-{max(rates):,.0f})"


def _latency(runs: http_intents.Runs) -> str:
    errors = f", {runs.errors} errors" if runs.errors else ""
    return f"p50 {runs.p50_ms:.1f} ms, p99 {runs.p99_ms:.1f} ms{errors}"


def http_rows(samples: dict[str, http_intents.Runs]) -> list[Row]:
    """Create and read of a payment intent over HTTP against a bare aiohttp handler."""
    ours, bare = samples["ours_create"], samples["bare_create"]
    share = ours.ratio(bare)
    met = (
        share >= HTTP_SHARE_TARGET
        and ours.rps >= HTTP_RATE_TARGET
        and ours.p99_ms <= HTTP_P99_TARGET_MS
        and ours.errors == 0
    )
    conns = f"{http_intents.CONNECTIONS} conn"
    return [
        Row(f"HTTP: bare aiohttp JSON POST ({conns})", _http_figure(bare), _latency(bare)),
        Row(
            f"HTTP: POST /api/v1/payments/intent, SQLite ({conns})",
            _http_figure(ours),
            _latency(ours),
            f"{share:.3f} of bare",
            f">= {HTTP_SHARE_TARGET:.2f} of bare, >= {HTTP_RATE_TARGET:,.0f}/s,"
            f" p99 <= {HTTP_P99_TARGET_MS:.0f} ms",
            verdict(met),
        ),
        Row(
            f"HTTP: bare aiohttp JSON GET ({conns})",
            _http_figure(samples["bare_read"]),
            _latency(samples["bare_read"]),
        ),
        Row(
            f"HTTP: GET /api/v1/payments/intent by lookup id, SQLite ({conns})",
            _http_figure(samples["ours_read"]),
            _latency(samples["ours_read"]),
            f"{samples['ours_read'].ratio(samples['bare_read']):.3f} of bare",
        ),
    ]


def _http_step(opts: Options) -> list[Row]:
    result: dict[str, http_intents.Runs] = {}

    def run() -> dict[str, Samples]:
        result.update(http_intents.bench_http(opts.http_seconds, opts.http_reps))
        return {}

    _step("HTTP create intent (wrk)", run)
    return http_rows(result)


def main(argv: list[str] | None = None) -> int:
    """Run everything, print the table; the exit status is 0 whatever the verdicts."""
    opts = parse(argv)
    load_before = machine.load()
    http_problem = http_intents.wrk_problem()
    if opts.suite == "http":
        rows = _http_step(opts) if http_problem is None else []
        print("\n".join(machine.describe(None)))
        print(f"Load average before: {load_before}; after: {machine.load()}")
        print(
            f"Medians of {opts.http_reps} interleaved repetitions of {opts.http_seconds:g} s"
            f" per workload.\n"
        )
        print(render(rows, markdown=opts.markdown))
        if http_problem is not None:
            print(f"\nHTTP rows skipped: {http_problem}")
        return 0
    pg_problem = fixtures.postgres_available() if opts.postgres else "disabled by --no-postgres"
    pg_version = machine.postgres_version(fixtures.POSTGRES_URL) if pg_problem is None else None
    rows = kernel_rows(opts)
    sqlite = _step("SQLite movements", lambda: movements.bench_sqlite(opts.movements, opts.reps))
    rows += movement_rows("SQLite", "sqlite3", sqlite, SQLITE_TARGET)
    if pg_problem is None:
        pg = _step(
            "PostgreSQL movements", lambda: movements.bench_postgres(opts.movements, opts.reps)
        )
        rows += movement_rows("PostgreSQL", "psycopg", pg, POSTGRES_TARGET)
    sqlite_transfers = _step(
        "SQLite transfers", lambda: transfers.bench_sqlite(opts.transfers, opts.reps)
    )
    rows += transfer_rows("SQLite", "sqlite3", sqlite_transfers)
    if pg_problem is None:
        pg_transfers = _step(
            "PostgreSQL transfers", lambda: transfers.bench_postgres(opts.transfers, opts.reps)
        )
        rows += transfer_rows("PostgreSQL", "psycopg", pg_transfers)
    sizes = (opts.small, opts.large, opts.reads, opts.reps)
    rows += read_rows(
        "SQLite", opts, _step("SQLite reads", lambda: reads.bench_reads_sqlite(*sizes))
    )
    if pg_problem is None:
        pg_reads = _step("PG reads", lambda: reads.bench_reads_postgres(*sizes))
        rows += read_rows("PostgreSQL", opts, pg_reads)
    if http_problem is None:
        rows += _http_step(opts)
    print("\n".join(machine.describe(pg_version)))
    print(f"Load average before: {load_before}; after: {machine.load()}")
    print(
        f"Medians of {opts.reps} interleaved repetitions; {opts.movements:,} movements, "
        f"{opts.transfers:,} transfers, {opts.reads:,} reads, {opts.kernel_ops:,} in-memory ops "
        f"per repetition; HTTP rows: {opts.http_reps} repetitions of {opts.http_seconds:g} s.\n"
    )
    print(render(rows, markdown=opts.markdown))
    if pg_problem is not None:
        print(f"\nPostgreSQL rows skipped: {pg_problem} ({fixtures.POSTGRES_URL})")
    if http_problem is not None:
        print(f"\nHTTP rows skipped: {http_problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
