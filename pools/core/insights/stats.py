"""Percentiles and spreads (pure): the one definition every indicator uses."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0 to 100) of sorted values, interpolated between the two nearest
    ranks (the method of numpy's default and of PromQL's quantile), None when empty."""
    if not ordered:
        return None
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Spread:
    count: int = 0
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    max: float | None = None
    min: float | None = None
    mean: float | None = None

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "count": self.count,
            "min": self.min,
            "p50": self.p50,
            "p90": self.p90,
            "p95": self.p95,
            "max": self.max,
            "mean": self.mean,
        }


def spread(values: Iterable[float]) -> Spread:
    ordered = sorted(values)
    if not ordered:
        return Spread()
    return Spread(
        count=len(ordered),
        p50=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p95=percentile(ordered, 95),
        max=ordered[-1],
        min=ordered[0],
        mean=sum(ordered) / len(ordered),
    )
