"""``python -m bench``: run every benchmark and print one results table.

Suites (the first argument): ``all`` (default: every part below except ``micro``'s
storage-level balance reads, which duplicate growth's balance read; about 9.5 minutes on two
cores, bounded by 10), ``http`` (HTTP rows against bare aiohttp and localstripe; needs
``wrk``), ``ledger`` (the issue's ledger workload, ours against raw sqlite3 / psycopg),
``peers`` (the ledger workload plus django-hordak and python-accounting, whose ratios need
ours), ``growth`` (reads and creates at 1k vs 100k history, server RSS after 100k intents),
``micro`` (kernel, storage movements, FX transfers, storage-level balance reads), ``events``
(the event pipeline end to end: creates, webhook deliveries to a loopback receiver, latency,
a dead endpoint; then, unless the suite is ``all``, whose 10-minute bound they would pass,
the ``events-drain`` part: standing backlogs drained by one SQLite server against the bare
client and by one and two ``treasury worker`` processes on PostgreSQL; about 2.5 minutes in
all), ``events-drain`` (that part alone), ``statements`` (wallet transactions and a month's
statement at 1k vs 1M postings, SQLite and PostgreSQL; about 2-3 minutes, not part of ``all``),
``hot`` (deposits, card payments, FX and disjoint transfers for 8 companies with 1 and 8
workers on PostgreSQL: whether shared accounts cap the gain; about 1.5 minutes, not part of
``all``), ``dashboard`` (server time of each dashboard page over 100k intents and 1M postings;
not in ``all``).
``--quick`` is a smoke run of the chosen suite (about 1-2 minutes for ``all``).
Peers (localstripe, django-hordak, python-accounting) are installed from PyPI into their own
venvs under ``build/bench-peers`` on first use; that install time is reported apart and is
not part of the time budget. Everything runs on loopback. A part that cannot run (no ``wrk``,
no PostgreSQL, a failed peer install, an error) leaves its rows out with a note saying why.
Progress goes to stderr; the table and the notes under it to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TypeVar

from bench import (
    dashboard,
    events,
    events_drain,
    fixtures,
    growth,
    hot,
    http_intents,
    kernel,
    ledger,
    ledger_plan,
    machine,
    movements,
    peer_ledgers,
    peers,
    reads,
    statements,
    transfers,
)
from bench.report import Row, cost, cpu, rate, ratio, render, verdict
from bench.timing import Samples

#: Ours on PostgreSQL (one worker, as django-hordak runs) must do this multiple of its rate ...
HORDAK_TARGET = 5.0
#: ... and ours on SQLite this multiple of python-accounting's.
ACCOUNTING_TARGET = 50.0

#: What each suite runs, in order.
SUITES = {
    "all": ("micro", "http", "ledger", "peers", "growth", "events"),
    "http": ("http",),
    "ledger": ("ledger",),
    "peers": ("ledger", "peers"),
    "growth": ("growth",),
    "micro": ("micro", "reads"),
    "events": ("events", "events-drain"),
    "events-drain": ("events-drain",),
    "statements": ("statements",),
    "dashboard": ("dashboard",),
    "hot": ("hot",),
}


@dataclass(frozen=True, slots=True)
class Options:
    """Counts for one run."""

    suite: str
    parts: tuple[str, ...]
    reps: int
    kernel_ops: int
    movements: int
    fx_transfers: int
    reads: int
    ledger_sqlite: int
    ledger_postgres: int
    ledger_reps: int
    hordak: int
    accounting: int
    peer_reps: int
    http_seconds: float
    http_warmup: float
    http_reps: int
    localstripe: bool
    growth_small: int
    growth_large: int
    growth_reads: int
    growth_creates: int
    growth_reps: int
    rss_intents: int
    rss_budget: float
    events_seconds: float
    events_paced: float
    statements_small: int
    statements_large: int
    statements_reads: int
    statements_reps: int
    events_drain: int
    dashboard: tuple[int, int, int]  # intents, postings, requests per page
    postgres: bool
    markdown: bool
    quick: bool


def parse(argv: list[str] | None) -> Options:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "suite", nargs="?", choices=tuple(SUITES), default="all", help="what to run (default all)"
    )
    parser.add_argument("--reps", type=int, default=5, help="micro repetitions (>= 3)")
    parser.add_argument("--kernel-ops", type=int, default=20_000, help="in-memory ops per rep")
    parser.add_argument("--movements", type=int, default=1_000, help="SQL movements per rep")
    parser.add_argument("--fx-transfers", type=int, default=300, help="FX transfers per rep")
    parser.add_argument("--reads", type=int, default=500, help="balance reads per rep")
    parser.add_argument("--ledger-sqlite", type=int, default=2_000, help="ledger transfers, SQLite")
    parser.add_argument(
        "--ledger-postgres",
        type=int,
        default=800,
        help="ledger transfers per contender, PostgreSQL",
    )
    parser.add_argument("--ledger-reps", type=int, default=7, help="ledger repetitions (>= 3)")
    parser.add_argument(
        "--hordak", type=int, default=peer_ledgers.HORDAK_TRANSFERS, help="hordak transfers"
    )
    parser.add_argument(
        "--accounting",
        type=int,
        default=peer_ledgers.ACCOUNTING_TRANSFERS,
        help="python-accounting transfers",
    )
    parser.add_argument("--peer-reps", type=int, default=5, help="runs per peer (>= 3)")
    parser.add_argument(
        "--http-seconds", type=float, default=http_intents.SECONDS, help="wrk seconds per run"
    )
    parser.add_argument(
        "--http-warmup", type=float, default=http_intents.WARMUP_SECONDS, help="wrk warm-up seconds"
    )
    parser.add_argument(
        "--http-reps",
        type=int,
        default=5,
        help="HTTP repetitions (>= 3; each is 9 wrk runs, 6 without localstripe)",
    )
    parser.add_argument("--no-localstripe", action="store_true", help="skip localstripe")
    parser.add_argument("--growth-small", type=int, default=1_000, help="small history")
    parser.add_argument("--growth-large", type=int, default=100_000, help="large history")
    parser.add_argument("--growth-reads", type=int, default=500, help="growth reads per rep")
    parser.add_argument("--growth-creates", type=int, default=100, help="growth creates per rep")
    parser.add_argument("--growth-reps", type=int, default=7, help="growth repetitions (>= 3)")
    parser.add_argument("--rss-intents", type=int, default=100_000, help="intents before RSS")
    parser.add_argument(
        "--rss-budget", type=float, default=65.0, help="wrk seconds at most for the RSS part"
    )
    parser.add_argument(
        "--events-seconds",
        type=float,
        default=events.SECONDS,
        help="events: seconds of creates at saturation (with and without an endpoint)",
    )
    parser.add_argument(
        "--events-paced",
        type=float,
        default=events.PACED_SECONDS,
        help=f"events: seconds of creates paced at {events.PACED_RATE:g}/s (twice)",
    )
    parser.add_argument(
        "--statements-small", type=int, default=1_000, help="statements: small history"
    )
    parser.add_argument(
        "--statements-large", type=int, default=1_000_000, help="statements: large history"
    )
    parser.add_argument(
        "--statements-reads", type=int, default=20, help="statements: reads of each kind per rep"
    )
    parser.add_argument(
        "--statements-reps", type=int, default=5, help="statements repetitions (>= 3)"
    )
    parser.add_argument(
        "--events-drain",
        type=int,
        default=events_drain.COUNT,
        help="events: deliveries in each standing backlog drained (0: no drain rows)",
    )
    parser.add_argument(
        "--dashboard",
        type=int,
        nargs=3,
        default=(dashboard.INTENTS, dashboard.POSTINGS, dashboard.REQUESTS),
        metavar=("INTENTS", "POSTINGS", "REQUESTS"),
        help="dashboard: intents and postings seeded, timed requests per page",
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL rows")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--quick", action="store_true", help="a smoke run with small counts")
    args = parser.parse_args(argv)
    if (
        min(
            args.reps,
            args.http_reps,
            args.ledger_reps,
            args.peer_reps,
            args.growth_reps,
            args.statements_reps,
        )
        < 3
    ):
        parser.error("every --*reps must be at least 3 (the figures are medians)")
    opts = Options(
        suite=args.suite,
        parts=SUITES[args.suite],
        reps=args.reps,
        kernel_ops=args.kernel_ops,
        movements=args.movements,
        fx_transfers=args.fx_transfers,
        reads=args.reads,
        ledger_sqlite=args.ledger_sqlite,
        ledger_postgres=args.ledger_postgres,
        ledger_reps=args.ledger_reps,
        hordak=args.hordak,
        accounting=args.accounting,
        peer_reps=args.peer_reps,
        http_seconds=args.http_seconds,
        http_warmup=args.http_warmup,
        http_reps=args.http_reps,
        localstripe=not args.no_localstripe,
        growth_small=args.growth_small,
        growth_large=args.growth_large,
        growth_reads=args.growth_reads,
        growth_creates=args.growth_creates,
        growth_reps=args.growth_reps,
        rss_intents=args.rss_intents,
        rss_budget=args.rss_budget,
        events_seconds=args.events_seconds,
        events_paced=args.events_paced,
        statements_small=args.statements_small,
        statements_large=args.statements_large,
        statements_reads=args.statements_reads,
        statements_reps=args.statements_reps,
        events_drain=args.events_drain,
        dashboard=tuple(args.dashboard),
        postgres=not args.no_postgres,
        markdown=args.markdown,
        quick=args.quick,
    )
    if args.quick:
        opts = replace(
            opts,
            reps=3,
            kernel_ops=2_000,
            movements=100,
            fx_transfers=30,
            reads=100,
            ledger_sqlite=100,
            ledger_postgres=50,
            ledger_reps=3,
            hordak=50,
            accounting=30,
            peer_reps=3,
            http_seconds=1.0,
            http_warmup=1.0,
            http_reps=3,
            growth_large=10_000,
            growth_reads=100,
            growth_creates=20,
            growth_reps=3,
            rss_intents=10_000,
            rss_budget=5.0,
            events_seconds=1.0,
            events_paced=1.0,
            statements_large=20_000,
            statements_reads=5,
            statements_reps=3,
            events_drain=min(opts.events_drain, 300),
            dashboard=(2_000, 20_000, 5),
        )
    return opts


T = TypeVar("T")


@dataclass(slots=True)
class Run:
    """What one run collected: rows, notes for under the table, and per-part seconds."""

    opts: Options
    pg_problem: str | None
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    ledger_sqlite: dict[str, Samples] | None = None
    ledger_postgres: dict[str, Samples] | None = None


def _step(label: str, fn: Callable[[], T]) -> T:
    print(f"... {label}", end="", file=sys.stderr, flush=True)
    start = time.perf_counter()
    result = fn()
    print(f" {time.perf_counter() - start:.1f}s", file=sys.stderr, flush=True)
    return result


def _guarded(run: Run, part: str, fn: Callable[[], None]) -> None:
    """Run one part, timing it; an exception leaves the part's rows out with a note."""
    start = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # one part failing must not end the run
        print(f"\n{part} FAILED:", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        first = (str(exc).strip().splitlines() or [""])[0]
        run.notes.append(f"{part}: failed ({type(exc).__name__}: {first}); see stderr")
    finally:
        run.seconds[part] = run.seconds.get(part, 0.0) + time.perf_counter() - start


# --- micro: kernel, storage movements, FX transfers, storage-level reads ----------------------


def _kernel_rows(opts: Options) -> list[Row]:
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


def _movement_rows(backend: str, raw_name: str, samples: dict[str, Samples]) -> list[Row]:
    """Storage-level movements (a report: the issue's targets are on the ledger rows)."""
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
            f"{ratio(samples['ours'], samples['raw']):.2f} of raw",
        ),
    ]


def _fx_rows(backend: str, raw_name: str, samples: dict[str, Samples]) -> list[Row]:
    """FX transfers, created pending (a report; same-currency ones are the ledger rows)."""
    ours, raw = samples["ours_fx"], samples["raw_fx"]
    return [
        Row(
            f"{backend}: raw {raw_name} FX transfer (2 SELECT, 4 UPDATE, 6 INSERT)",
            rate(raw),
            cpu(raw),
        ),
        Row(
            f"{backend}: transfers.create, FX, created pending",
            rate(ours),
            cpu(ours),
            f"{ratio(ours, raw):.2f} of raw",
        ),
    ]


def _micro(run: Run) -> None:
    opts = run.opts
    run.rows += _kernel_rows(opts)
    sqlite = _step("SQLite movements", lambda: movements.bench_sqlite(opts.movements, opts.reps))
    run.rows += _movement_rows("SQLite", "sqlite3", sqlite)
    if run.pg_problem is None:
        pg = _step(
            "PostgreSQL movements", lambda: movements.bench_postgres(opts.movements, opts.reps)
        )
        run.rows += _movement_rows("PostgreSQL", "psycopg", pg)
    fx = _step(
        "SQLite FX transfers",
        lambda: transfers.bench_sqlite(opts.fx_transfers, opts.reps, ("fx",)),
    )
    run.rows += _fx_rows("SQLite", "sqlite3", fx)
    if run.pg_problem is None:
        pg_fx = _step(
            "PostgreSQL FX transfers",
            lambda: transfers.bench_postgres(opts.fx_transfers, opts.reps, ("fx",)),
        )
        run.rows += _fx_rows("PostgreSQL", "psycopg", pg_fx)


def _read_rows(backend: str, opts: Options, samples: dict[str, Samples]) -> list[Row]:
    """Storage-level balance reads (a report: the target is on the growth rows)."""
    small, large = f"{opts.growth_small:,}", f"{opts.growth_large:,}"
    return [
        Row(
            f"{backend}: storage get_account, {small} postings",
            cost(samples["small"]),
            cpu(samples["small"]),
        ),
        Row(
            f"{backend}: storage get_account, {large} postings",
            cost(samples["large"]),
            cpu(samples["large"]),
            f"{ratio(samples['large'], samples['small'], of_cost=True):.2f}x small",
        ),
        Row(
            f"{backend}: raw driver read, {large} postings",
            cost(samples["raw"]),
            cpu(samples["raw"]),
            f"ours {ratio(samples['large'], samples['raw'], of_cost=True):.2f}x raw",
        ),
    ]


def _reads(run: Run) -> None:
    opts = run.opts
    sizes = (opts.growth_small, opts.growth_large, opts.reads, opts.reps)
    sqlite = _step("SQLite storage reads", lambda: reads.bench_reads_sqlite(*sizes))
    run.rows += _read_rows("SQLite", opts, sqlite)
    if run.pg_problem is None:
        pg = _step("PostgreSQL storage reads", lambda: reads.bench_reads_postgres(*sizes))
        run.rows += _read_rows("PostgreSQL", opts, pg)


# --- HTTP -------------------------------------------------------------------------------------


def _http(run: Run) -> None:
    opts = run.opts
    problem = http_intents.wrk_problem()
    if problem is not None:
        run.notes.append(f"HTTP rows skipped: {problem}")
        return
    use_ls = opts.localstripe and http_intents.localstripe_problem() is None
    result = _step(
        "HTTP (wrk)",
        lambda: http_intents.bench_http(
            opts.http_seconds, opts.http_reps, opts.http_warmup, localstripe=use_ls
        ),
    )
    run.rows += http_intents.http_rows(result)
    if not opts.localstripe:
        run.notes.append("localstripe rows skipped: --no-localstripe")
    elif (ls_problem := http_intents.localstripe_problem()) is not None:
        run.notes.append(f"localstripe rows skipped: {ls_problem}")


# --- ledger and its peers ---------------------------------------------------------------------


def _ledger(run: Run) -> None:
    opts = run.opts
    run.ledger_sqlite = _step(
        "ledger, SQLite", lambda: ledger.bench_sqlite(opts.ledger_sqlite, opts.ledger_reps)
    )
    run.rows += ledger.rows(sqlite=run.ledger_sqlite)
    if run.pg_problem is not None:
        run.notes.append(f"Ledger PostgreSQL rows skipped: {run.pg_problem}")
        return
    run.ledger_postgres = _step(
        "ledger, PostgreSQL",
        lambda: ledger.bench_postgres(opts.ledger_postgres, opts.ledger_reps),
    )
    run.rows += ledger.rows(postgres=run.ledger_postgres)


def _over(ours: Samples, peer: Samples) -> float:
    return ours.median_rate / peer.median_rate


def peer_row(
    label: str,
    peer: peer_ledgers.PeerRuns,
    ours: dict[str, Samples] | None,
    keys: tuple[tuple[str, str], ...],
    target: float,
) -> Row:
    """One peer's row: its rate, and ours (median rate, ``keys``' samples) over it.

    The first of ``keys`` carries the target. The peer runs fewer transfers than ours (the
    label says how many), in a process of its own, so the ratio is of medians, not paired.
    """
    samples = peer.samples
    figure = rate(samples)
    if not peer.balances_ok:
        figure += " BALANCES WRONG"
    if ours is None:
        return Row(label, figure, cpu(samples), "ours not measured", f">= {target:g}x", "")
    ratios = [(name, _over(ours[key], samples)) for key, name in keys if key in ours]
    text = "; ".join(f"ours {name} {value:,.1f}x" for name, value in ratios)
    first_name, first = ratios[0]
    met = first >= target and peer.balances_ok
    return Row(label, figure, cpu(samples), text, f"ours {first_name} >= {target:g}x", verdict(met))


def _peers(run: Run) -> None:
    opts = run.opts
    problem = peers.problem(peers.ACCOUNTING)
    if problem is not None:
        run.notes.append(f"python-accounting row skipped: {problem}")
    else:
        acc = _step(
            "python-accounting",
            lambda: peer_ledgers.bench_accounting(opts.accounting, opts.peer_reps),
        )
        run.rows.append(
            peer_row(
                f"Peer SQLite: python-accounting Journal Entry, {ledger_plan.WALLETS} wallets,"
                f" {acc.count:,} transfers (ours: {opts.ledger_sqlite:,})",
                acc,
                run.ledger_sqlite,
                (("ours", "SQLite"),),
                ACCOUNTING_TARGET,
            )
        )
        run.details.append(
            "python-accounting: " + ", ".join(f"{k} {v}" for k, v in acc.versions.items())
        )
    if run.pg_problem is not None:
        run.notes.append(f"django-hordak row skipped: PostgreSQL: {run.pg_problem}")
        return
    problem = peers.problem(peers.HORDAK)
    if problem is not None:
        run.notes.append(f"django-hordak row skipped: {problem}")
        return
    hordak = _step(
        "django-hordak",
        lambda: peer_ledgers.bench_hordak(opts.hordak, opts.peer_reps, fixtures.POSTGRES_URL),
    )
    run.rows.append(
        peer_row(
            f"Peer PostgreSQL: django-hordak Account.transfer_to, {ledger_plan.WALLETS} wallets,"
            f" {hordak.count:,} transfers (ours: {opts.ledger_postgres:,})",
            hordak,
            run.ledger_postgres,
            (("ours", "1 worker"), ("ours_8", f"{ledger.WORKERS} workers")),
            HORDAK_TARGET,
        )
    )
    run.details.append(
        "django-hordak: " + ", ".join(f"{k} {v}" for k, v in hordak.versions.items())
    )


# --- growth -----------------------------------------------------------------------------------


def _growth(run: Run) -> None:
    opts = run.opts
    result = growth.bench_growth(
        opts.growth_small,
        opts.growth_large,
        reads=opts.growth_reads,
        creates=opts.growth_creates,
        reps=opts.growth_reps,
        rss_intents=opts.rss_intents,
        http_budget=opts.rss_budget,
        progress=lambda message: print(f"... growth: {message}", file=sys.stderr, flush=True),
    )
    run.rows += growth.growth_rows(result)
    run.details += growth.growth_details(result)
    if result.rss_problem is not None:
        run.notes.append(f"Growth server RSS rows skipped: {result.rss_problem}")


# --- events -----------------------------------------------------------------------------------


def _events(run: Run) -> None:
    opts = run.opts
    result = events.bench_events(
        opts.events_seconds,
        opts.events_paced,
        progress=lambda phase: print(f"... events: {phase}", file=sys.stderr, flush=True),
    )
    run.rows += events.events_rows(result)


# --- statements -------------------------------------------------------------------------------


def _statements(run: Run) -> None:
    opts = run.opts
    sizes = (
        opts.statements_small,
        opts.statements_large,
        opts.statements_reads,
        opts.statements_reps,
    )
    sqlite = _step("statements, SQLite", lambda: statements.bench_sqlite(*sizes))
    run.rows += statements.rows("SQLite", opts.statements_small, opts.statements_large, sqlite)
    if run.pg_problem is not None:
        run.notes.append(f"Statements PostgreSQL rows skipped: {run.pg_problem}")
        return
    pg = _step("statements, PostgreSQL", lambda: statements.bench_postgres(*sizes))
    run.rows += statements.rows("PostgreSQL", opts.statements_small, opts.statements_large, pg)


def _hot(run: Run) -> None:
    """Hot accounts: 1 and 8 workers through the services (PostgreSQL only)."""
    if run.pg_problem is not None:
        run.notes.append(f"Hot-account rows skipped: {run.pg_problem}")
        return
    samples = _step("hot accounts, PostgreSQL", hot.bench)
    run.rows += hot.rows(samples)


def _events_drain(run: Run) -> None:
    opts = run.opts
    if opts.events_drain <= 0:
        return
    result = events_drain.bench_drain(
        opts.events_drain,
        postgres_url=fixtures.POSTGRES_URL if opts.postgres else None,
        progress=lambda phase: print(f"... events: {phase}", file=sys.stderr, flush=True),
    )
    run.rows += events_drain.drain_rows(result)
    run.details += events_drain.drain_details(result)
    if result.postgres_problem is not None:
        run.notes.append(f"Events drain PostgreSQL rows skipped: {result.postgres_problem}")


def _dashboard(run: Run) -> None:
    rows, note = dashboard.bench(*run.opts.dashboard, step=_step)
    run.rows += rows
    run.notes.append(note)


PARTS: dict[str, Callable[[Run], None]] = {
    "micro": _micro,
    "reads": _reads,
    "http": _http,
    "ledger": _ledger,
    "peers": _peers,
    "growth": _growth,
    "events": _events,
    "statements": _statements,
    "events-drain": _events_drain,
    "dashboard": _dashboard,
    "hot": _hot,
}


def _install_peers(opts: Options) -> tuple[float, list[str]]:
    """Build the peer venvs the chosen parts need (first run only); seconds, and which."""
    wanted: list[peers.Peer] = []
    if "http" in opts.parts and opts.localstripe and http_intents.wrk_problem() is None:
        wanted.append(peers.LOCALSTRIPE)
    if "peers" in opts.parts:
        wanted.append(peers.ACCOUNTING)
        if opts.postgres:
            wanted.append(peers.HORDAK)
    missing = [p.name for p in wanted if not (p.home / ".installed").exists()]
    start = time.perf_counter()
    for peer in wanted:
        if peer is peers.LOCALSTRIPE:
            http_intents.localstripe_problem()  # cached: the HTTP part asks again
        else:
            peers.problem(peer)
    return time.perf_counter() - start, missing


def _settings(opts: Options) -> list[str]:
    out = [f"Suite: {opts.suite} ({', '.join(opts.parts)}){'; --quick' if opts.quick else ''}."]
    if "micro" in opts.parts or "reads" in opts.parts:
        out.append(
            f"Micro: medians of {opts.reps} interleaved repetitions; {opts.kernel_ops:,} in-memory"
            f" ops, {opts.movements:,} movements, {opts.fx_transfers:,} FX transfers"
            + (f", {opts.reads:,} storage reads" if "reads" in opts.parts else "")
            + " per repetition."
        )
    if "http" in opts.parts:
        out.append(
            f"HTTP: {opts.http_reps} interleaved repetitions of {opts.http_seconds:g} s per"
            f" workload after a {opts.http_warmup:g} s warm-up each; wrk -t1"
            f" -c{http_intents.CONNECTIONS}; loopback."
        )
    if "ledger" in opts.parts:
        out.append(
            f"Ledger: medians of {opts.ledger_reps} interleaved repetitions (ours, raw, ...) of"
            f" the plan's first {opts.ledger_sqlite:,} (SQLite) / {opts.ledger_postgres:,}"
            " (PostgreSQL) transfers between 100 wallets, then all 100 balances read"
            " (the issue's 20,000 transfers do not fit the budget)."
        )
    if "peers" in opts.parts:
        out.append(
            f"Peers: {opts.peer_reps} fresh-process runs each of {opts.hordak:,} (django-hordak)"
            f" / {opts.accounting:,} (python-accounting) transfers of the same plan; ratios are"
            " ours' median rate over the peer's (not paired: the peers run after ours)."
        )
    if "growth" in opts.parts:
        out.append(
            f"Growth: medians of {opts.growth_reps} repetitions; {opts.growth_reads:,} reads and"
            f" {opts.growth_creates:,} creates per repetition at {opts.growth_small:,} vs"
            f" {opts.growth_large:,}; RSS after {opts.rss_intents:,} intents (at most"
            f" {opts.rss_budget:g} s of wrk, the rest bulk-inserted)."
        )
    if "events" in opts.parts:
        out.append(
            f"Events: one SQLite server; {opts.events_seconds:g} s of creates at saturation"
            f" ({events.CONNECTIONS} in flight, Python aiohttp client) without and with one"
            f" endpoint, then {opts.events_paced:g} s at {events.PACED_RATE:g} creates/s, then"
            f" {events.BARE_SECONDS:g} s of bare posts, then {opts.events_paced:g} s at"
            f" {events.PACED_RATE:g}/s beside a dead endpoint; one run each; loopback."
        )
    if "statements" in opts.parts:
        out.append(
            f"Statements: medians of {opts.statements_reps} interleaved repetitions of"
            f" {opts.statements_reads} reads each, through WalletStatementService, of one"
            f" wallet's history at {opts.statements_small:,} vs {opts.statements_large:,}"
            f" postings (bulk-seeded, see bench/statements.py); the month holds"
            f" {statements.MONTH} transactions at both sizes."
        )
    if "events-drain" in opts.parts and opts.events_drain > 0:
        out.append(
            f"Events drain: standing backlogs of {opts.events_drain:,} due deliveries (built"
            " through the services, nothing delivering), each drained once: by one"
            " `treasury serve` on SQLite, then by one and by two `treasury worker` processes on"
            " PostgreSQL; the bare client posts as many bodies; rates over first to last"
            " arrival; loopback."
        )
    if "dashboard" in opts.parts:
        out.append(dashboard.settings(*opts.dashboard))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the suite's parts, print the table; the exit status is 0 whatever the verdicts."""
    started = time.perf_counter()
    opts = parse(argv)
    load_before = machine.load()
    needs_pg = any(
        p in opts.parts for p in ("micro", "reads", "ledger", "peers", "statements", "events-drain")
    )
    pg_problem: str | None = None
    pg_version: str | None = None
    if not opts.postgres:
        pg_problem = "disabled by --no-postgres"
    elif needs_pg:
        pg_problem = fixtures.postgres_available()
        if pg_problem is not None:
            pg_problem = f"{pg_problem} ({fixtures.POSTGRES_URL})"
        else:
            pg_version = machine.postgres_version(fixtures.POSTGRES_URL)
    run = Run(opts, pg_problem)
    install_seconds, installed = _step("peer venvs", lambda: _install_peers(opts))
    for part in opts.parts:
        _guarded(run, part, partial(PARTS[part], run))
    total = time.perf_counter() - started
    print("\n".join(machine.describe(pg_version)))
    print(f"Load average before: {load_before}; after: {machine.load()}")
    print("\n".join(_settings(opts)))
    print()
    print(render(run.rows, markdown=opts.markdown))
    print()
    for note in run.notes:
        print(f"Note: {note}")
    if run.notes:
        print()
    if run.details:
        print("\n".join(run.details))
        print()
    print("Elapsed per part: " + ", ".join(f"{k} {v:.0f} s" for k, v in run.seconds.items()))
    if installed:
        budget = f"; {total - install_seconds:.0f} s without the first-run peer install"
        install = f" ({', '.join(installed)} installed in {install_seconds:.0f} s{budget})"
    else:
        install = f" (peer venvs already installed; check {install_seconds:.1f} s)"
    print(f"Total elapsed: {total:.0f} s = {total / 60:.1f} min{install}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
