"""The soak run's leak criterion (tests/soak/soak_trend.py) on synthetic memory series: a steady
leak fails it at the same rate as before, a process that fills bounded tables and levels off
does not."""
from __future__ import annotations

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "soak"))
from soak_trend import later_half, measured, slope, trends_upward  # noqa: E402

BOUND = 8.0


def series(minutes: float, level, noise_mb: float = 0.3, seed: int = 1) -> list[tuple[float, float]]:
    """A sample every 10 s of `level(minute)` plus noise, as (seconds, MB)."""
    rnd = random.Random(seed)
    return [(s, level(s / 60) + rnd.uniform(-noise_mb, noise_mb))
            for s in range(0, int(minutes * 60) + 1, 10)]


def test_a_steady_leak_over_the_bound_is_caught_in_a_short_and_a_long_run():
    for minutes in (10, 25):
        window = 0.8 * minutes
        rate = 1.25 * BOUND / window            # a quarter over the bound across the window
        assert trends_upward(series(minutes, lambda m: 20 + rate * m), BOUND), minutes


def test_a_steady_growth_under_the_bound_is_not_a_leak():
    for minutes in (10, 25):
        rate = 0.6 * BOUND / (0.8 * minutes)
        assert not trends_upward(series(minutes, lambda m: 20 + rate * m), BOUND), minutes


def test_a_process_filling_bounded_tables_and_levelling_off_passes():
    # 20 MB of tables filled with a time constant of 8 minutes, in a 25-minute run: still rising
    # at the end, and the whole window's slope (the old criterion) called it a leak
    def level(m):
        return 24 + 20 * (1 - math.exp(-m / 8))
    points = series(25, level)
    window = measured(points)
    assert slope(window) * (window[-1][0] - window[0][0]) / 60 > BOUND
    assert not trends_upward(points, BOUND)


def test_a_leak_that_starts_late_is_caught():
    # flat for 12 minutes, then 1 MB a minute: the later half sees it at full rate
    points = series(25, lambda m: 30 + max(0.0, m - 12))
    assert slope(later_half(measured(points))) > 0.8
    assert trends_upward(points, BOUND)
