"""SVG charts (pools/core/charts.py): axes from 0 to the capacity, units, hover, one point."""

from __future__ import annotations

import re

from pools.core import charts
from pools.core.charts import line_chart, number, round_top

T0 = 1_767_225_600  # 2026-01-01 00:00 UTC


def axis_labels(svg: str) -> list[str]:
    return re.findall(r'class="chart-axis" text-anchor="end">([^<]*)</text>', svg)


def test_a_quarter_full_framebuffer_is_drawn_a_quarter_full_with_units() -> None:
    svg = line_chart([(T0, 160.0), (T0 + 300, 160.0)], title="FB", y_max=640.0, unit="GiB")
    assert axis_labels(svg)[:3] == ["0 GiB", "320 GiB", "640 GiB"]
    ys = [float(y) for y in re.findall(r'<circle cx="[^"]+" cy="([^"]+)"', svg)]
    top, bottom = 10, 160 - 20
    assert all(abs((bottom - y) / (bottom - top) - 0.25) < 0.01 for y in ys)
    assert "min 160 GiB · avg 160 GiB · max 160 GiB" in svg


def test_without_a_capacity_the_axis_ends_at_a_round_number_above_the_data() -> None:
    assert [round_top(v) for v in (0.3, 7, 13, 240, 2600)] == [1, 10, 20, 250, 5000]
    svg = line_chart([(T0, 3.0), (T0 + 60, 7.0)], title="x", y_max=None, unit="GiB")
    assert axis_labels(svg)[:3] == ["0 GiB", "5 GiB", "10 GiB"]


def test_hover_shows_time_and_value_and_one_point_is_still_drawn() -> None:
    svg = line_chart([(T0 + 3600, 42.0)], title="Util", unit="%")
    assert '<circle cx="' in svg and 'class="chart-point chart-point-only"' in svg
    assert "<title>01 Jan 01:00 UTC: 42 %</title>" in svg
    starts = re.findall(r'class="chart-axis">([^<]*)</text>', svg)
    assert starts == ["01:00 UTC"]  # one label: start and end would read the same


def test_start_and_end_labels_differ_and_numbers_read_well() -> None:
    svg = line_chart([(T0, 1.0), (T0 + 86_400 * 2, 2.0)], title="t")
    assert "01 Jan 00:00 UTC</text>" in svg and "03 Jan 00:00 UTC</text>" in svg
    assert (number(3.25, "GiB"), number(72.4, "%"), number(5.0, "%")) == (
        "3.2 GiB",
        "72 %",
        "5 %",
    )


def test_titles_are_escaped() -> None:
    assert "<b>" not in line_chart([(T0, 1.0)], title="<b>")


def test_lines_chart_draws_a_line_per_gpu_in_gpu_order_with_a_legend() -> None:
    svg = charts.lines_chart(
        {"10": [(0, 5), (60, 7)], "2": [(0, 50), (60, 70)], "0": [(30, 12)]},
        title="GPU utilisation, 1h",
    )
    assert svg.count('class="chart-line"') == 3
    keys = re.findall(r'class="chart-key chart-series-(\d)">GPU (\d+)</span>', svg)
    assert keys == [("0", "0"), ("1", "2"), ("2", "10")]
    assert "GPU 2</span> min 50 % · avg 60 % · max 70 %" in svg
    assert svg.count("chart-point-only") == 1  # the GPU with one point still shows it
    assert "<title>GPU 10: min 5 % · avg 6 % · max 7 %</title>" in svg


def test_lines_chart_without_data_says_so() -> None:
    assert "No data for Power, 7d" in charts.lines_chart({"0": []}, title="Power, 7d", unit="W")


def time_labels(svg: str) -> list[str]:
    return re.findall(r'class="chart-axis"(?: text-anchor="end")?>([^<]* UTC)</text>', svg)


def test_a_24_hour_chart_carries_its_dates_so_time_never_reads_backwards() -> None:
    """A day of points from 19:51 to 19:45 the next day: without dates the axis reads
    19:51 on the left and 19:45 on the right."""
    start = T0 + 19 * 3600 + 51 * 60
    svg = line_chart([(start, 50.0), (start + 86_400 - 360, 60.0)], title="24h")
    assert time_labels(svg) == ["01 Jan 19:51 UTC", "02 Jan 19:45 UTC"]
    # Within one day, the hours alone.
    assert time_labels(line_chart([(T0 + 3600, 1.0), (T0 + 7200, 2.0)], title="2h")) == [
        "01:00 UTC",
        "02:00 UTC",
    ]


def test_the_range_chosen_is_the_range_drawn_however_short_the_history() -> None:
    """A 30-day chart of a single day's points spans 30 days: the points sit at its right
    end, not stretched over the width as a 24 h chart."""
    end = T0 + 30 * 86_400
    points = [(end - 86_400 + h * 3600, 40.0) for h in range(25)]
    svg = line_chart(points, title="30d", x_range=(T0, end))
    assert time_labels(svg) == ["01 Jan 00:00 UTC", "31 Jan 00:00 UTC"]
    xs = [float(x) for x in re.findall(r'<circle cx="([^"]+)"', svg)]
    left, right = 64, 640 - 10
    assert min(xs) > left + (right - left) * 28 / 30
    lines = charts.lines_chart({"0": points}, title="30d", x_range=(T0, end))
    assert time_labels(lines) == ["01 Jan 00:00 UTC", "31 Jan 00:00 UTC"]
