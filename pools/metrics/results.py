"""What a metrics query returns to the rest of the portal (pure data)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple


class Sample(NamedTuple):
    # A tuple, not a dataclass: thousands of them go through the cache on every page, and
    # tuples unpickle at twice the speed.
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class InstantResult:
    """Named query results, or the reason there are none. Never stale: a failure is cached
    as a failure, not replaced by old figures."""

    series: Mapping[str, list[Sample]] = field(default_factory=dict)
    error: str | None = None

    @property
    def available(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class RangeResult:
    """One line (`points`), or one line per value of a label (`series`, asked `by` it)."""

    points: list[tuple[float, float]] = field(default_factory=list)
    error: str | None = None
    series: Mapping[str, list[tuple[float, float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class RangeSeries:
    """Several series of one range query, each with its labels."""

    series: list[tuple[Mapping[str, str], list[tuple[float, float]]]] = field(default_factory=list)
    error: str | None = None
