"""Small statistics helpers shared by both sides."""

from __future__ import annotations

from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation; ``nan`` when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """``{"n", "p50_ms", "p99_ms", "max_ms"}`` for latencies given in seconds."""
    return {
        "n": len(seconds),
        "p50_ms": percentile(seconds, 50) * 1000.0,
        "p99_ms": percentile(seconds, 99) * 1000.0,
        "max_ms": (max(seconds) * 1000.0) if seconds else float("nan"),
    }
