"""Server-side SVG charts: no JavaScript library, nothing to vendor (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape


def line_chart(
    points: Sequence[tuple[float, float]],
    *,
    title: str,
    y_max: float | None = 100.0,
    unit: str = "%",
    width: int = 640,
    height: int = 160,
) -> str:
    """An SVG line chart of (unix time, value) points, with a min/avg/max caption."""
    label = escape(title)
    if not points:
        return (
            f'<svg class="chart" role="img" aria-label="{label}: no data" '
            f'viewBox="0 0 {width} {height}"><text x="12" y="{height // 2}" '
            f'class="chart-empty">No data for {label}</text></svg>'
        )
    pad_left, pad_bottom, pad_top = 48, 20, 10
    inner_w, inner_h = width - pad_left - 8, height - pad_bottom - pad_top
    t0, t1 = points[0][0], points[-1][0]
    values = [v for _, v in points]
    top = y_max if y_max is not None else max(max(values), 1.0) * 1.1
    span = max(t1 - t0, 1.0)

    def x(t: float) -> float:
        return pad_left + (t - t0) / span * inner_w

    def y(v: float) -> float:
        return pad_top + inner_h - min(max(v, 0.0), top) / top * inner_h

    path = " ".join(
        f"{'M' if i == 0 else 'L'}{x(t):.1f},{y(v):.1f}" for i, (t, v) in enumerate(points)
    )
    area = f"{path} L{x(t1):.1f},{y(0):.1f} L{x(t0):.1f},{y(0):.1f} Z"
    avg = sum(values) / len(values)
    caption = f"min {min(values):.0f}{unit} · avg {avg:.0f}{unit} · max {max(values):.0f}{unit}"
    start = datetime.fromtimestamp(t0, UTC).strftime("%d %b %H:%M")
    end = datetime.fromtimestamp(t1, UTC).strftime("%d %b %H:%M")
    grid = "".join(
        f'<line x1="{pad_left}" x2="{width - 8}" y1="{y(top * f):.1f}" y2="{y(top * f):.1f}" '
        f'class="chart-grid"/><text x="{pad_left - 4}" y="{y(top * f) + 4:.1f}" '
        f'class="chart-axis" text-anchor="end">{top * f:.0f}</text>'
        for f in (0.0, 0.5, 1.0)
    )
    return (
        f'<svg class="chart" role="img" aria-label="{label}: {escape(caption)}" '
        f'viewBox="0 0 {width} {height}" width="100%">{grid}'
        f'<path d="{area}" class="chart-area"/><path d="{path}" class="chart-line"/>'
        f'<text x="{pad_left}" y="{height - 4}" class="chart-axis">{start} UTC</text>'
        f'<text x="{width - 8}" y="{height - 4}" class="chart-axis" text-anchor="end">'
        f"{end} UTC</text></svg>"
        f'<p class="chart-caption">{label}: {escape(caption)}</p>'
    )
