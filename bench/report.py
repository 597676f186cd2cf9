"""The results table: one row per figure, with its ratio, target and whether the target is met."""

from __future__ import annotations

from dataclasses import dataclass

from bench.timing import Samples, paired_ratios


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table; empty strings print as blanks."""

    measure: str
    figure: str
    cpu: str = ""
    ratio: str = ""
    target: str = ""
    status: str = ""


def rate(samples: Samples) -> str:
    """``median/s (min-max)`` over repetitions, plus the median cost of one operation."""
    rates = samples.rates
    return (
        f"{samples.median_rate:,.0f}/s ({min(rates):,.0f}-{max(rates):,.0f})"
        f" = {samples.median_us:,.1f} us"
    )


def cpu(samples: Samples) -> str:
    """This process's median CPU time per operation (the rest of the wall time is waiting)."""
    return f"{samples.median_cpu_us:,.1f} us"


def cost(samples: Samples) -> str:
    """The median cost of one operation, with the spread over repetitions."""
    per_op = [s / samples.count * 1e6 for s in samples.seconds]
    return f"{samples.median_us:,.1f} us ({min(per_op):,.1f}-{max(per_op):,.1f})"


def ratio(numerator: Samples, denominator: Samples, *, of_cost: bool = False) -> float:
    """The median of per-repetition ratios: of rates, or of costs with ``of_cost``."""
    values = sorted(paired_ratios(numerator, denominator))
    middle = values[len(values) // 2]
    if len(values) % 2 == 0:
        middle = (values[len(values) // 2 - 1] + middle) / 2
    return 1 / middle if of_cost else middle


def verdict(met: bool) -> str:
    """``met`` or ``MISSED``."""
    return "met" if met else "MISSED"


_HEADERS = ("Measure", "Figure (median, min-max)", "Client CPU/op", "Ratio", "Target", "Status")


def _cells(row: Row) -> tuple[str, ...]:
    return (row.measure, row.figure, row.cpu, row.ratio, row.target, row.status)


def render(rows: list[Row], *, markdown: bool = False) -> str:
    """The table as aligned text, or as a Markdown table."""
    lines = [_HEADERS, *(_cells(r) for r in rows)]
    if markdown:
        out = ["| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
        out += ["| " + " | ".join(cells) + " |" for cells in lines[1:]]
        return "\n".join(out)
    widths = [max(len(cells[i]) for cells in lines) for i in range(len(_HEADERS))]
    text = ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) for cells in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in text)
