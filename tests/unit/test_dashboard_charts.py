"""The dashboard's SVG chart geometry."""

from __future__ import annotations

from treasury_aiohttp.dashboard_charts import HEIGHT, WIDTH, bar_chart, line_chart


def test_bars_scale_to_the_largest_value_and_stay_in_the_view_box() -> None:
    chart = bar_chart([0, 5, 10], ["a", "b", "c"])
    assert not chart.empty
    zero, half, full = chart.bars
    assert zero.height == 0
    assert half.height * 2 == full.height
    for bar in chart.bars:
        assert bar.x >= 0 and bar.x + bar.width <= WIDTH
        assert bar.y >= 0 and bar.y + bar.height <= HEIGHT
    assert [bar.label for bar in chart.bars] == ["a", "b", "c"]


def test_all_zero_bars_are_an_empty_chart() -> None:
    chart = bar_chart([0] * 24, [str(h) for h in range(24)])
    assert chart.empty and len(chart.bars) == 24
    assert all(bar.height == 0 for bar in chart.bars)


def test_a_line_runs_from_the_lowest_to_the_highest_value() -> None:
    chart = line_chart([100, 300, 200])
    points = [tuple(map(float, p.split(","))) for p in chart.points.split()]
    xs, ys = [x for x, _ in points], [y for _, y in points]
    assert xs == sorted(xs) and xs[0] >= 0 and xs[-1] <= WIDTH
    # SVG's y grows downwards: the highest value is the smallest y.
    assert ys[1] < ys[2] < ys[0]
    assert line_chart([5]).points.count(",") == 2  # one value: a flat line
    assert line_chart([]).empty
