"""The pure parts of ``bench.versus``: reading tables, pairing rows, ratios and flags."""

from __future__ import annotations

import pytest
from bench.versus import Figure, figure, pair, parse_table, render

TABLE = """\
| Measure | Figure (median, min-max) | Client CPU/op | Ratio | Target | Status |
|---|---|---|---|---|---|
| HTTP: POST /api/v1/transfer | 3,129 req/s (3,052-3,247) | p50 9.8 ms | 0.176 of bare POST |  |  |
| Ledger SQLite: wallets.balance, each of 100 | 28.3 us (26.9-29.0) | 28.3 us | costs 4.65x |  |  |
"""


def test_the_table_s_rows_are_read_as_rates_and_costs() -> None:
    rows = parse_table("Suite: http\n\n" + TABLE + "\nNote: x | y\n")
    assert rows == {
        "HTTP: POST /api/v1/transfer": Figure(3129.0, rate=True),
        "Ledger SQLite: wallets.balance, each of 100": Figure(28.3, rate=False),
        "HTTP: POST /api/v1/transfer [ratio column]": Figure(0.176, rate=True),
        "Ledger SQLite: wallets.balance, each of 100 [ratio column]": Figure(4.65, rate=False),
    }
    assert figure("1,743/s (1,605-1,775) = 573.6 us") == Figure(1743.0, rate=True)
    assert figure("no number") is None


def test_rows_pair_by_measure_per_round_and_flag_the_slower_side() -> None:
    before = [{"r": Figure(100.0, True), "c": Figure(10.0, False), "old": Figure(1.0, True)}] * 3
    after = [
        {"r": Figure(90.0, True), "c": Figure(10.2, False), "new": Figure(2.0, True)},
        {"r": Figure(94.0, True), "c": Figure(10.4, False)},
        {"r": Figure(99.0, True), "c": Figure(10.6, False)},
    ]
    rows = {p.measure: p for p in pair(before, after)}
    assert rows["r"].ratios == pytest.approx((0.90, 0.94, 0.99))
    assert rows["r"].ratio == pytest.approx(0.94)
    assert rows["r"].slower(0.05)
    assert not rows["r"].slower(0.07)
    # A cost is slower above 1: 1.04 is within 5 %, not within 3 %.
    assert rows["c"].ratio == pytest.approx(1.04)
    assert not rows["c"].slower(0.05)
    assert rows["c"].slower(0.03)
    assert rows["old"].after is None
    assert rows["new"].before is None
    assert rows["new"].after == 2.0
    assert not rows["new"].slower(0.0)
    text = render(rows.values(), 0.05)
    assert "| r | 100.0 | 94.0 | 0.940 (0.900-0.990) | SLOWER |" in text
    assert "| old | 1 |  |  | only before |" in text
    assert "| new |  | 2 |  | only after |" in text


def test_ratio_rows_keep_three_significant_digits() -> None:
    rows = pair([{"x": Figure(0.226, True)}], [{"x": Figure(0.172, True)}])
    assert "| x | 0.226 | 0.172 | 0.761 (0.761-0.761) | SLOWER |" in render(rows, 0.05)
