"""How the soak run tells a leak from a process filling bounded tables (tests/soak/test_soak.py).

A leak grows at one rate for as long as the load runs; a long-lived role that fills what it is
allowed to keep (the replay filter, caches keyed by task, the allocator's heaps) rises early and
levels off, and at a slow task rate it may still be rising well past any fixed warm-up. So the
trend judged is the slope over the later half of the measured window, held to the growth a leak
may show over the whole window."""
from __future__ import annotations

import statistics

WARMUP_FRACTION = 0.2


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (t seconds, y), per minute."""
    if len(points) < 3:
        return 0.0
    ts = [t for t, _ in points]
    ys = [y for _, y in points]
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return 60.0 * sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var if var else 0.0


def measured(points: list[tuple]) -> list[tuple]:
    """The samples after the warm-up (the first WARMUP_FRACTION of the run)."""
    t0 = points[0][0]
    return [p for p in points if p[0] - t0 >= WARMUP_FRACTION * (points[-1][0] - t0)]


def later_half(points: list[tuple]) -> list[tuple]:
    return points[len(points) // 2:]


def trends_upward(points: list[tuple[float, float]], bound_mb: float) -> bool:
    """True when the later half's slope, over the whole measured window, exceeds `bound_mb`."""
    window = measured(points)
    minutes = (window[-1][0] - window[0][0]) / 60 if len(window) > 1 else 0.0
    return slope(later_half(window)) * minutes > bound_mb
