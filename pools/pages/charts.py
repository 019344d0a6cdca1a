"""What the pages with charts share: the time range a page asks for, refused in a message
when unknown."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from django.contrib import messages
from django.http import HttpRequest

from pools.core import charts

BAD_RANGE_STATUS = 400


def chart_range(
    request: HttpRequest,
    *,
    ranges: Mapping[str, timedelta] = charts.TIME_RANGES,
    default: str = charts.DEFAULT_RANGE,
) -> tuple[str, int]:
    """The chart range the page asks for (one of `ranges`; none asked: `default`), and the
    page's status: an unknown range is a 400 that says which ranges exist (the page shows
    the default range), not a silent 24 h."""
    span = request.GET.get("span") or default
    if span not in ranges:
        messages.error(request, f"Unknown time range {span!r}: one of {', '.join(ranges)}.")
        return default, BAD_RANGE_STATUS
    return span, 200
