"""The dashboard's charts: small SVG drawings made on the server (no script, no library).

Each function returns the geometry a template draws (bars or a polyline in a fixed view box,
scaled by the browser); the figures themselves are written beside every chart as a table, so a
screen reader (and a test) reads the numbers, not the picture.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The view box every chart is drawn in; the stylesheet makes it as wide as its container.
WIDTH = 600
HEIGHT = 160
_PAD = 4


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: where it stands, how tall, and what it shows (the ``<title>`` tooltip)."""

    x: float
    y: float
    width: float
    height: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    """A drawn chart: its bars, or the ``points`` of its line; ``empty`` when all is zero."""

    bars: tuple[Bar, ...] = ()
    points: str = ""
    empty: bool = True
    width: int = WIDTH
    height: int = HEIGHT


def bar_chart(values: list[int], labels: list[str]) -> Chart:
    """One bar per value (at least 0), scaled to the largest."""
    if not values:
        return Chart()
    top = max(max(values), 1)
    slot = (WIDTH - 2 * _PAD) / len(values)
    bars = []
    for i, (value, label) in enumerate(zip(values, labels, strict=True)):
        height = (HEIGHT - 2 * _PAD) * max(value, 0) / top
        bars.append(
            Bar(
                x=round(_PAD + i * slot + slot * 0.1, 2),
                y=round(HEIGHT - _PAD - height, 2),
                width=round(slot * 0.8, 2),
                height=round(height, 2),
                label=label,
            )
        )
    return Chart(bars=tuple(bars), empty=all(v == 0 for v in values))


def line_chart(values: list[int]) -> Chart:
    """A line through ``values`` (oldest first), scaled between their least and greatest."""
    if not values:
        return Chart()
    if len(values) == 1:
        values = values * 2
    low, high = min(values), max(values)
    span = max(high - low, 1)
    step = (WIDTH - 2 * _PAD) / (len(values) - 1)
    scale = (HEIGHT - 2 * _PAD) / span
    points = " ".join(
        f"{round(_PAD + i * step, 2)},{round(HEIGHT - _PAD - scale * (v - low), 2)}"
        for i, v in enumerate(values)
    )
    return Chart(points=points, empty=False)
