"""The dashboard's charts: small SVG drawings made on the server (no script, no library).

Each function returns the geometry a template draws: bars or line segments, the value axis's
gridlines with their labels, and a few labels along the time axis. Across, positions are
percentages of the chart's width; down, pixels of its fixed height. So the chart fills its
container at any width while its text keeps its size and shape (a view box stretched to the
width would squash the labels). The figures are also written beside every chart as a table, so
a screen reader (and a test) reads the numbers, not the picture.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

#: The chart's height in CSS pixels; the plot sits between TOP and BOTTOM, the time axis's
#: labels below it.
HEIGHT = 190
TOP = 16
BOTTOM = HEIGHT - 24
#: About how many intervals the value axis is cut into.
INTERVALS = 4

Label = Callable[[int], str]


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar (``x``, ``width`` in %; ``y``, ``height`` in px) and its ``<title>`` tooltip."""

    x: float
    y: float
    width: float
    height: float
    label: str


@dataclass(frozen=True, slots=True)
class Segment:
    """One stretch of a line chart, from (``x1`` %, ``y1`` px) to (``x2`` %, ``y2`` px)."""

    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True, slots=True)
class Tick:
    """A value-axis gridline at ``y`` px, labelled with its value."""

    y: float
    label: str


@dataclass(frozen=True, slots=True)
class Mark:
    """A time-axis label at ``x`` %; ``anchor`` is SVG's ``text-anchor`` (the first and last
    labels keep inside the chart)."""

    x: float
    label: str
    anchor: str


@dataclass(frozen=True, slots=True)
class Chart:
    """A drawn chart: bars or segments, its axes' labels; ``empty`` when every value is 0."""

    bars: tuple[Bar, ...] = ()
    segments: tuple[Segment, ...] = ()
    ticks: tuple[Tick, ...] = ()
    marks: tuple[Mark, ...] = ()
    empty: bool = True
    height: int = HEIGHT
    bottom: int = BOTTOM


def _step(span: int) -> int:
    """A round step (1, 2 or 5 times a power of ten) cutting ``span`` into about
    :data:`INTERVALS` parts; whole numbers only, as the values are (minor units, counts)."""
    raw = max(-(-span // INTERVALS), 1)
    magnitude: int = 10 ** (len(str(raw)) - 1)
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)


def _scale(low: int, high: int) -> tuple[int, int, int]:
    """The axis's ends and step: from 0 (or below it, for negative values) to a round value at
    or above ``high``."""
    low, high = min(low, 0), max(high, 0)
    step = _step(max(high - low, 1))
    start = (low // step) * step
    end = -(-high // step) * step
    return start, max(end, start + step), step


def _y(value: int, start: int, end: int) -> float:
    return round(BOTTOM - (value - start) * (BOTTOM - TOP) / (end - start), 2)


def _ticks(start: int, end: int, step: int, label: Label) -> tuple[Tick, ...]:
    return tuple(Tick(_y(v, start, end), label(v)) for v in range(start, end + 1, step))


def _marks(positions: list[tuple[float, str]]) -> tuple[Mark, ...]:
    last = len(positions) - 1
    return tuple(
        Mark(x, text, "start" if i == 0 else "end" if i == last else "middle")
        for i, (x, text) in enumerate(positions)
    )


def bar_chart(values: list[int], titles: list[str], label: Label, marks: dict[int, str]) -> Chart:
    """One bar per value (at least 0); ``titles`` are the bars' tooltips, ``label`` writes a
    value on the value axis, ``marks`` labels some bars' places on the time axis (by index)."""
    if not values:
        return Chart()
    start, end, step = _scale(0, max(values))
    slot = 100 / len(values)
    bars = []
    for i, (value, title) in enumerate(zip(values, titles, strict=True)):
        top = _y(max(value, 0), start, end)
        bars.append(
            Bar(
                x=round(i * slot + slot * 0.15, 3),
                y=top,
                width=round(slot * 0.7, 3),
                height=round(_y(0, start, end) - top, 2),
                label=title,
            )
        )
    placed = [(round(i * slot + slot / 2, 3), text) for i, text in sorted(marks.items())]
    return Chart(
        bars=tuple(bars),
        ticks=_ticks(start, end, step, label),
        marks=_marks(placed),
        empty=all(v == 0 for v in values),
    )


def line_chart(values: list[int], label: Label, first: str, last: str) -> Chart:
    """A line through ``values`` (oldest first) on an axis from 0 (or the lowest value, when
    negative) to a round value above the highest; ``first`` and ``last`` label its ends."""
    if not values:
        return Chart()
    if len(values) == 1:
        values = values * 2
    start, end, step = _scale(min(values), max(values))
    across = 100 / (len(values) - 1)
    points = [(round(i * across, 3), _y(v, start, end)) for i, v in enumerate(values)]
    segments = tuple(Segment(x1, y1, x2, y2) for (x1, y1), (x2, y2) in pairwise(points))
    return Chart(
        segments=segments,
        ticks=_ticks(start, end, step, label),
        marks=_marks([(0, first), (100, last)]),
        empty=False,
    )
