"""Server-side SVG charts: no JavaScript library, nothing to vendor (pure).

The y axis starts at 0 and ends at the capacity when there is one (100 % for utilisation,
the node's framebuffer for memory), so a quarter-full chart looks a quarter full; without a
capacity it ends at a round number above the data. Every point carries its time and value
as an SVG <title>, which the browser shows on hover; a single point is drawn as a dot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape

# The time ranges a chart offers. Every range draws about CHART_POINTS points: the step
# grows with the range, so a 30-day chart costs Prometheus and the page what a 1-hour one
# does, and a 1-hour chart is not three dots.
TIME_RANGES = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT_RANGE = "24h"
# The insights' windows (7, 30 or 90 days) as chart ranges: the window chosen is the range
# drawn unless a shorter one is asked for.
WINDOW_RANGES = {**TIME_RANGES, "90d": timedelta(days=90)}
CHART_POINTS = 240
# Below the usual DCGM exporter scrape interval, a finer step only repeats samples.
MIN_STEP = timedelta(seconds=15)


class UnknownRange(ValueError):
    """A time range that is not one of TIME_RANGES."""


def chart_step(span: timedelta, points: int = CHART_POINTS) -> timedelta:
    """The step that gives `points` points over `span`, in whole seconds, at least MIN_STEP."""
    seconds = max(int(span.total_seconds() // points), int(MIN_STEP.total_seconds()))
    return timedelta(seconds=seconds)


def time_range(
    name: str, ranges: Mapping[str, timedelta] = TIME_RANGES
) -> tuple[timedelta, timedelta]:
    """The span and step of a named range ("1h" ... "30d", or one of `ranges`);
    UnknownRange for anything else."""
    if name not in ranges:
        raise UnknownRange(f"Unknown time range {name!r}: one of {', '.join(ranges)}.")
    span = ranges[name]
    return span, chart_step(span)


_PAD_LEFT, _PAD_RIGHT, _PAD_BOTTOM, _PAD_TOP = 64, 10, 20, 10


def round_top(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least `value` (≥ 1)."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)


def number(value: float, unit: str) -> str:
    """`72 %`, `3.5 GiB`: one decimal below ten, none above."""
    digits = 1 if abs(value) < 10 and value != int(value) else 0
    return f"{value:.{digits}f} {unit}".rstrip()


def _time_labels(t0: float, t1: float) -> tuple[str, str | None]:
    """The start label and the end label, or None when it would read the same. A range of
    a day or more, or one that crosses midnight, carries the dates: "19:51" on the left and
    "19:45" on the right would read as time running backwards."""
    first, last = datetime.fromtimestamp(t0, UTC), datetime.fromtimestamp(t1, UTC)
    dated = t1 - t0 >= 86_400 or first.date() != last.date()
    fmt = "%d %b %H:%M" if dated else "%H:%M"
    start = first.strftime(fmt) + " UTC"
    end = last.strftime(fmt) + " UTC"
    return start, (end if end != start else None)


def _extent(times: Sequence[float], x_range: tuple[float, float] | None) -> tuple[float, float]:
    """The times the axis spans: the range chosen, stretched to any point outside it."""
    if x_range is None:
        return min(times), max(times)
    return min(x_range[0], *times), max(x_range[1], *times)


@dataclass(frozen=True)
class _Frame:
    """Where values and times land in the SVG's coordinates."""

    t0: float
    t1: float
    top: float
    width: int
    height: int

    def x(self, t: float) -> float:
        inner = self.width - _PAD_LEFT - _PAD_RIGHT
        # A single point sits in the middle rather than on the axis.
        if self.t1 == self.t0:
            return _PAD_LEFT + inner / 2
        return _PAD_LEFT + (t - self.t0) / (self.t1 - self.t0) * inner

    def y(self, v: float) -> float:
        inner = self.height - _PAD_BOTTOM - _PAD_TOP
        return _PAD_TOP + inner - min(max(v, 0.0), self.top) / self.top * inner


def _grid(frame: _Frame, unit: str) -> str:
    return "".join(
        f'<line x1="{_PAD_LEFT}" x2="{frame.width - _PAD_RIGHT}" y1="{frame.y(v):.1f}" '
        f'y2="{frame.y(v):.1f}" class="chart-grid"/><text x="{_PAD_LEFT - 6}" '
        f'y="{frame.y(v) + 4:.1f}" class="chart-axis" text-anchor="end">'
        f"{escape(number(v, unit))}</text>"
        for v in (0.0, frame.top / 2, frame.top)
    )


def _dots(points: Sequence[tuple[float, float]], frame: _Frame, unit: str) -> str:
    only = len(points) == 1
    return "".join(
        f'<circle cx="{frame.x(t):.1f}" cy="{frame.y(v):.1f}" r="{4 if only else 3}" '
        f'class="chart-point{" chart-point-only" if only else ""}"><title>'
        f"{datetime.fromtimestamp(t, UTC):%d %b %H:%M} UTC: {escape(number(v, unit))}"
        "</title></circle>"
        for t, v in points
    )


def _time_axis(frame: _Frame) -> str:
    start, end = _time_labels(frame.t0, frame.t1)
    bottom = frame.height - 4
    text = f'<text x="{_PAD_LEFT}" y="{bottom}" class="chart-axis">{start}</text>'
    if end:
        text += (
            f'<text x="{frame.width - _PAD_RIGHT}" y="{bottom}" class="chart-axis" '
            f'text-anchor="end">{end}</text>'
        )
    return text


def line_chart(
    points: Sequence[tuple[float, float]],
    *,
    title: str,
    y_max: float | None = 100.0,
    unit: str = "%",
    width: int = 640,
    height: int = 160,
    x_range: tuple[float, float] | None = None,
) -> str:
    """An SVG line chart of (unix time, value) points, with a min/avg/max caption; `y_max`
    is the capacity (None: scale to a round number above the data); `x_range` the times the
    axis spans, the range chosen (None: the data's first and last point)."""
    label = escape(title)
    if not points:
        return (
            f'<svg class="chart" role="img" aria-label="{label}: no data" '
            f'viewBox="0 0 {width} {height}"><text x="12" y="{height // 2}" '
            f'class="chart-empty">No data for {label}</text></svg>'
        )
    values = [v for _, v in points]
    top = y_max if y_max else round_top(max(values))
    frame = _Frame(*_extent([t for t, _ in points], x_range), top, width, height)
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{frame.x(t):.1f},{frame.y(v):.1f}"
        for i, (t, v) in enumerate(points)
    )
    area = (
        f"{path} L{frame.x(frame.t1):.1f},{frame.y(0):.1f} "
        f"L{frame.x(frame.t0):.1f},{frame.y(0):.1f} Z"
    )
    caption = " · ".join(
        f"{name} {number(v, unit)}"
        for name, v in (
            ("min", min(values)),
            ("avg", sum(values) / len(values)),
            ("max", max(values)),
        )
    )
    return (
        f'<svg class="chart" role="img" aria-label="{label}: {escape(caption)}" '
        f'viewBox="0 0 {width} {height}" width="100%">{_grid(frame, unit)}'
        f'<path d="{area}" class="chart-area"/><path d="{path}" class="chart-line"/>'
        f"{_dots(points, frame, unit)}{_time_axis(frame)}"
        f'</svg><p class="chart-caption">{label}: {escape(caption)}</p>'
    )


SERIES_COLOURS = 8  # .chart-series-0 … -7 in the stylesheet; more lines reuse them


def _series_summary(points: Sequence[tuple[float, float]], unit: str) -> str:
    values = [v for _, v in points]
    return (
        f"min {number(min(values), unit)} · avg {number(sum(values) / len(values), unit)}"
        f" · max {number(max(values), unit)}"
    )


def lines_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    name: str = "GPU",
    y_max: float | None = 100.0,
    unit: str = "%",
    width: int = 640,
    height: int = 160,
    x_range: tuple[float, float] | None = None,
) -> str:
    """One line per series (a GPU each, keyed by its index) on one SVG chart. Hovering a line
    shows its GPU with min/avg/max; the legend below names each line's colour. `x_range`:
    as line_chart's."""
    drawn = {key: list(points) for key, points in sorted(series.items(), key=_gpu_order) if points}
    if not drawn:
        return line_chart([], title=title, y_max=y_max, unit=unit, width=width, height=height)
    times = [t for points in drawn.values() for t, _ in points]
    top = y_max if y_max else round_top(max(v for p in drawn.values() for _, v in p))
    frame = _Frame(*_extent(times, x_range), top, width, height)
    label = escape(title)
    lines, legend = [], []
    for i, (key, points) in enumerate(drawn.items()):
        css = f"chart-series-{i % SERIES_COLOURS}"
        who = escape(f"{name} {key}")
        summary = escape(_series_summary(points, unit))
        path = " ".join(
            f"{'M' if j == 0 else 'L'}{frame.x(t):.1f},{frame.y(v):.1f}"
            for j, (t, v) in enumerate(points)
        )
        dots = _dots(points, frame, unit) if len(points) == 1 else ""
        lines.append(
            f'<g class="{css}"><path d="{path}" class="chart-line">'
            f"<title>{who}: {summary}</title></path>{dots}</g>"
        )
        legend.append(f'<span class="chart-key {css}">{who}</span> {summary}')
    return (
        f'<svg class="chart" role="img" aria-label="{label}, {len(drawn)} lines" '
        f'viewBox="0 0 {width} {height}" width="100%">{_grid(frame, unit)}'
        f"{''.join(lines)}{_time_axis(frame)}</svg>"
        f'<p class="chart-caption">{label}: {"; ".join(legend)}</p>'
    )


def _gpu_order(item: tuple[str, object]) -> tuple[int, int, str]:
    """GPUs by index, a GPU's MIG instances ("3 instance 7") by instance after it."""
    gpu, _, instance = item[0].partition(" instance ")
    if not gpu.isdigit():
        return (1 << 30, 0, item[0])
    return (int(gpu), int(instance) if instance.isdigit() else -1, "")
