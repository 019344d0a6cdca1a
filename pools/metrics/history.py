"""One path for the history of every chart drawn from recorded series (a pool's page, the
insights): the recording rules' series where they exist, the raw series before their first
point. A node's charts read its per-GPU raw series only: no rule records them.

Recording rules only record from the moment they are loaded, while Prometheus may hold
weeks of raw DCGM samples from before (a backfill, or rules added to a running install). A
chart that read only the recorded series would draw one dot for a 30-day span on a new
install; one that read only the raw series would cost a scan of every GPU series a step.
So a chart asks the recorded series first, and when they start after the span does, asks
the raw series for the part before, on the same step grid: two range queries at most, one
when the rules cover the span or no rule answers (then the raw series are the chart).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from pools.metrics import source
from pools.metrics.results import RangeResult

Points = list[tuple[float, float]]


def earliest(lines: Mapping[str, Points]) -> float | None:
    """The first time any line has a point, or None when all are empty."""
    starts = [points[0][0] for points in lines.values() if points]
    return min(starts) if starts else None


def raw_window(
    first: float, *, span: timedelta, step: timedelta, now: float
) -> tuple[timedelta, datetime] | None:
    """The span and end of the raw query that fills the chart before `first` (the recorded
    series' first point) on the step grid, or None when the rules cover the span."""
    steps = int((first - (now - span.total_seconds())) // step.total_seconds()) - 1
    if steps < 1:
        return None
    return step * steps, datetime.fromtimestamp(first, UTC) - step


def _lines(result: RangeResult) -> dict[str, Points]:
    return dict(result.series) if result.series else {"": list(result.points)}


def joined(early: Mapping[str, Points], late: Mapping[str, Points]) -> dict[str, Points]:
    """Each line's raw points before the recorded ones: one line a key of either."""
    return {key: early.get(key, []) + late.get(key, []) for key in early.keys() | late.keys()}


def _joined(before: RangeResult, after: RangeResult, by: str | None) -> RangeResult:
    merged = joined(_lines(before), _lines(after))
    if by is None:
        return RangeResult(merged.get("", []), before.error)
    return RangeResult(series=merged, error=before.error)


def recorded_then_raw(
    recorded: str,
    raw: str,
    *,
    span: timedelta,
    step: timedelta,
    now: datetime | None = None,
    by: str | None = None,
) -> RangeResult:
    """The chart over the last `span`: `recorded` where it has points, `raw` before them (or
    all along when `recorded` has none). With `by`, one line per value of that label."""
    end = now or datetime.now().astimezone()
    found = source.history(recorded, span=span, step=step, now=now, by=by)
    if found.error is not None:
        return found
    first = earliest(_lines(found))
    if first is None:
        return source.history(raw, span=span, step=step, now=now, by=by)
    window = raw_window(first, span=span, step=step, now=end.timestamp())
    if window is None:
        return found
    before_span, before_end = window
    before = source.history(raw, span=before_span, step=step, now=before_end, by=by)
    return _joined(before, found, by)
