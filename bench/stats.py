"""Percentiles and summaries of latency samples (nanoseconds in, milliseconds out)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values (``p`` in 0..100)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return float(sorted_values[rank - 1])


def summary(samples_ns: Sequence[int]) -> dict[str, Any]:
    """``{n, p50, p95, min, max, mean}`` in milliseconds."""
    values = sorted(v / 1e6 for v in samples_ns)
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "min": values[0],
        "max": values[-1],
        "mean": sum(values) / len(values),
    }


def flatten(rounds: Sequence[Sequence[int]]) -> list[int]:
    """All samples of all rounds."""
    return [v for r in rounds for v in r]


def round_medians(rounds: Sequence[Sequence[int]]) -> list[float]:
    """The median of each round, in milliseconds (their spread is the run's noise)."""
    return [percentile(sorted(v / 1e6 for v in r), 50) for r in rounds if r]


def spread(values: Sequence[float]) -> float:
    """(max - min) / min of per-round medians, as a fraction (0.1 = 10 %)."""
    values = [v for v in values if v and not math.isnan(v)]
    if len(values) < 2:
        return 0.0
    return (max(values) - min(values)) / min(values)
