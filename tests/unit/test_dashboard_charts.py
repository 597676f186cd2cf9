"""The dashboard's SVG chart geometry: bars and lines inside the plot, round axis values."""

from __future__ import annotations

from treasury_aiohttp.dashboard.charts import BOTTOM, TOP, bar_chart, line_chart


def test_bars_scale_to_the_axis_and_stay_inside_the_chart() -> None:
    chart = bar_chart([0, 5, 10], ["a", "b", "c"], str, {0: "first", 2: "last"})
    assert not chart.empty
    zero, half, full = chart.bars
    assert zero.height == 0
    assert half.height * 2 == full.height
    for bar in chart.bars:
        assert bar.x >= 0 and bar.x + bar.width <= 100  # percent of the width
        assert bar.y >= TOP and bar.y + bar.height == BOTTOM
    assert [bar.label for bar in chart.bars] == ["a", "b", "c"]
    # 10 cut in about four: steps of 5, from 0 to 10, each labelled at its height.
    assert [t.label for t in chart.ticks] == ["0", "5", "10"]
    assert [t.y for t in chart.ticks] == [BOTTOM, full.y + full.height / 2, full.y]
    assert [(m.label, m.anchor) for m in chart.marks] == [("first", "start"), ("last", "end")]


def test_axis_values_are_round() -> None:
    def ticks(top: int) -> list[int]:
        return [int(t.label) for t in bar_chart([top], [""], str, {}).ticks]

    assert ticks(1) == [0, 1]
    assert ticks(7) == [0, 2, 4, 6, 8]
    assert ticks(2_500) == [0, 1_000, 2_000, 3_000]
    assert ticks(165_000) == [0, 50_000, 100_000, 150_000, 200_000]


def test_all_zero_bars_are_an_empty_chart() -> None:
    chart = bar_chart([0] * 24, [str(h) for h in range(24)], str, {})
    assert chart.empty and len(chart.bars) == 24
    assert all(bar.height == 0 for bar in chart.bars)
    assert [t.label for t in chart.ticks] == ["0", "1"]


def test_a_line_runs_through_the_values_on_an_axis_from_zero() -> None:
    chart = line_chart([100, 300, 200], str, "then", "now")
    first, second = chart.segments
    assert (first.x1, first.x2, second.x2) == (0, 50, 100)
    assert first.x2 == second.x1 and first.y2 == second.y1
    # SVG's y grows downwards: the highest value is the smallest y.
    assert first.y2 < second.y2 < first.y1
    assert [t.label for t in chart.ticks] == ["0", "100", "200", "300"]
    assert [m.label for m in chart.marks] == ["then", "now"]


def test_a_negative_balance_takes_the_axis_below_zero() -> None:
    chart = line_chart([-150, 50], str, "", "")
    assert [t.label for t in chart.ticks] == ["-150", "-100", "-50", "0", "50"]
    assert len(line_chart([5], str, "", "").segments) == 1  # one value: a flat line
    assert line_chart([], str, "", "").empty
