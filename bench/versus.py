"""A named older commit against this tree, each with its own install: ``python -m bench.versus``.

``python -m bench.versus COMMIT [--after COMMIT] --suite http --suite ledger --rounds 2``
makes a tree of each commit (``git archive`` into ``<cache>/<sha>/tree``; the working tree
itself when ``--after`` is not given) and a virtualenv per tree (``<cache>/<sha>/venv``,
``pip install -e 'tree[server,postgres]'``), so each tree's entry points (the ``treasury``
command, its pluggy plugins) are its own. Both are cached by sha: a second run installs nothing.
The cache is ``build/ab`` unless ``--cache`` says otherwise.

Then each suite runs as ``python -m bench SUITE --markdown`` of each tree's own bench with
that tree's venv, before and after alternating (before first in even rounds, after first in
odd ones), ``--rounds`` times. Every row of the tables is paired by its measure; each round
gives the ratio after/before of the row's median figure, and the tool prints, per row, the
median before and after, the median of those paired ratios and their min-max over the rounds,
flagging a row whose median ratio is slower than ``--threshold`` (default 5 %). A rate is
slower below 1, a cost (``us``) above 1. A row printed by one tree only is listed as such. A row's
Ratio cell (against a baseline of the same run, such as raw sqlite3) is paired too, as a row
of its own named ``measure [ratio column]``, its first number; it moves less with the
machine's load than the figure does (a cell starting ``costs`` or ``... x small`` is a cost).

``--server-cpu create`` (and ``read``, ``balance``, ``transfer``) adds ``bench.ab``'s figure:
each tree's own ``treasury serve``, driven by ``wrk`` alternately, server CPU per request
read from ``/proc``. It moves far less with the machine's other load than the rates do.
Arguments after ``--`` go to each ``python -m bench`` (``-- --http-reps 3``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench import ab

REPO = Path(__file__).resolve().parent.parent
_NUMBER = re.compile(r"-?[\d,]+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class Figure:
    """A row's median figure and whether more of it is better (a rate) or worse (a cost)."""

    value: float
    rate: bool


def figure(text: str) -> Figure | None:
    """The median of a table cell such as ``3,753 req/s (3,458-3,916)`` or ``28.3 us (...)``."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    head = text[match.end() :].lstrip()
    return Figure(float(match.group().replace(",", "")), not head.startswith(("us", "ms")))


def parse_table(text: str) -> dict[str, Figure]:
    """The rows of ``python -m bench --markdown``'s table: measure to median figure."""
    rows: dict[str, Figure] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or cells[0] == "Measure":
            continue
        if set(cells[0]) <= set("-"):
            continue
        value = figure(cells[1])
        if value is not None:
            rows[cells[0]] = value
        # The Ratio cell is against a baseline of the same run, so it moves less with load.
        against = figure(cells[3]) if len(cells) > 3 else None
        if against is not None:
            worse_up = "costs" in cells[3] or "x small" in cells[3]
            rows[f"{cells[0]} [ratio column]"] = Figure(against.value, not worse_up)
    return rows


@dataclass(frozen=True, slots=True)
class Paired:
    """One row over the rounds: medians, paired ratios after/before, and the verdict."""

    measure: str
    before: float | None
    after: float | None
    ratios: tuple[float, ...]
    rate: bool

    @property
    def ratio(self) -> float | None:
        """The median of the per-round ratios after/before."""
        return statistics.median(self.ratios) if self.ratios else None

    def slower(self, threshold: float) -> bool:
        """Whether the median ratio says after is slower than before by more than threshold."""
        r = self.ratio
        if r is None:
            return False
        return r < 1 - threshold if self.rate else r > 1 + threshold


def pair(before: list[dict[str, Figure]], after: list[dict[str, Figure]]) -> list[Paired]:
    """Rows of alternated rounds paired by measure, in the order they first appear."""
    names = list(dict.fromkeys(m for table in (*before, *after) for m in table))
    out = []
    for name in names:
        b = [t[name] for t in before if name in t]
        a = [t[name] for t in after if name in t]
        ratios = tuple(
            y[name].value / x[name].value
            for x, y in zip(before, after, strict=False)
            if name in x and name in y and x[name].value
        )
        rate = (b or a)[0].rate
        out.append(
            Paired(
                name,
                statistics.median(f.value for f in b) if b else None,
                statistics.median(f.value for f in a) if a else None,
                ratios,
                rate,
            )
        )
    return out


def _figure(value: float) -> str:
    """A row's value: rates and milliseconds with one decimal, ratios (below 10) to three
    significant digits, so that 0.226 of a bare handler does not print as 0.2."""
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


def render(rows: Iterable[Paired], threshold: float) -> str:
    """One line per row: before, after, ratio after/before (min-max) and a flag."""
    lines = ["| Measure | Before (median) | After (median) | After/before (min-max) | Flag |"]
    lines.append("|---|---|---|---|---|")
    for row in rows:
        if row.before is None or row.after is None:
            b = "" if row.before is None else _figure(row.before)
            a = "" if row.after is None else _figure(row.after)
            only = "only before" if row.after is None else "only after"
            lines.append(f"| {row.measure} | {b} | {a} |  | {only} |")
            continue
        r = row.ratio
        spread = f"{min(row.ratios):.3f}-{max(row.ratios):.3f}" if row.ratios else ""
        flag = "SLOWER" if row.slower(threshold) else ""
        lines.append(
            f"| {row.measure} | {_figure(row.before)} | {_figure(row.after)} |"
            f" {r:.3f} ({spread}) | {flag} |"
        )
    return "\n".join(lines)


def _sha(commit: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def prepare(commit: str | None, cache: Path) -> tuple[Path, Path]:
    """The tree of ``commit`` (or the working tree) and its venv's bin directory, cached."""
    if commit is None:
        home = cache / ("worktree-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:12])
        tree = REPO
    else:
        home = cache / _sha(commit)
        tree = home / "tree"
        if not (tree / "pyproject.toml").exists():
            tree.mkdir(parents=True, exist_ok=True)
            archive = subprocess.Popen(
                ["git", "-C", str(REPO), "archive", _sha(commit)], stdout=subprocess.PIPE
            )
            subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
            archive.wait()
    venv = home / "venv"
    if not (home / ".installed").exists():
        print(f"... installing {tree} into {venv}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "install", "-q", "-e", f"{tree}[server,postgres]"]
        subprocess.run(pip, check=True)
        (home / ".installed").touch()
    peers = tree / "build"
    if commit is not None and not peers.exists():
        # The peers' venvs (localstripe) are the same for both trees: share them.
        peers.symlink_to(REPO / "build")
    return tree, venv / "bin"


def _bench(tree: Path, bin_dir: Path, suite: str, extra: list[str]) -> dict[str, Figure]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args = [str(bin_dir / "python"), "-m", "bench", suite, "--markdown", *extra]
    out = subprocess.run(args, cwd=tree, env=env, check=True, capture_output=True, text=True)
    return parse_table(out.stdout)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, install, alternate, print the paired rows."""
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(prog="python -m bench.versus", description=__doc__)
    parser.add_argument("before", help="the older commit")
    parser.add_argument("--after", help="a second commit (default: the working tree)")
    parser.add_argument("--suite", action="append", default=[], help="bench suite (repeatable)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations (default 2)")
    parser.add_argument("--threshold", type=float, default=0.05, help="flag beyond (0.05)")
    parser.add_argument("--server-cpu", action="append", default=[], choices=ab.WORKLOADS)
    parser.add_argument("--ab-rounds", type=int, default=6, help="server CPU rounds (6)")
    parser.add_argument("--cache", type=Path, default=REPO / "build" / "ab")
    args = parser.parse_args(argv)
    sides = [prepare(args.before, args.cache), prepare(args.after, args.cache)]
    for suite in args.suite:
        tables: list[list[dict[str, Figure]]] = [[], []]
        for n in range(args.rounds):
            for i in (0, 1) if n % 2 == 0 else (1, 0):
                print(f"... {suite} round {n + 1}, side {i}", file=sys.stderr, flush=True)
                tables[i].append(_bench(*sides[i], suite, extra))
        print(
            f"\n{suite}: {args.before} (before) vs {args.after or 'working tree'} (after),"
            f" {args.rounds} alternated rounds\n"
        )
        print(render(pair(tables[0], tables[1]), args.threshold))
    for workload in args.server_cpu:
        clis = ([str(sides[0][1] / "treasury")], [str(sides[1][1] / "treasury")])
        a, b = ab.compare(sides[0][0], sides[1][0], workload, args.ab_rounds, 3.0, clis)
        paired = [y / x for x, y in zip(a.cpu_us, b.cpu_us, strict=True)]
        print(
            f"\nserver CPU per request, {workload}, {args.ab_rounds} alternated rounds of 3 s:"
            f" before {statistics.median(a.cpu_us):.1f} us, after"
            f" {statistics.median(b.cpu_us):.1f} us, after/before {statistics.median(paired):.3f}"
            f" ({min(paired):.3f}-{max(paired):.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
