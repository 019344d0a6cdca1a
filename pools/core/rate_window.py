"""A request rate as a sliding-window counter: the arithmetic, apart from where it is kept.

Time is cut into windows one period long. Each request adds one to its window's count, and
the rate over the last period is estimated as the current window's count plus the previous
window's, weighted by how much of the previous window still lies within the last period.
The estimate assumes the previous window's requests were spread evenly over it: for a
client at a steady rate it is exact, and a burst at the end of one window still counts
against the start of the next.

What it buys over a log of each request's time: a request is one atomic increment and one
read of the previous count, so two requests at once cannot both take the last place.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class RateWindow(NamedTuple):
    index: int  # which window `now` falls in, counted from the epoch
    elapsed: float  # how much of it has gone, 0 <= elapsed < 1


def window_at(now: float, period: float) -> RateWindow:
    index = math.floor(now / period)
    return RateWindow(index, now / period - index)


def estimate(current: int, previous: int, elapsed: float) -> float:
    """Requests in the last period: this window's, and the part of the previous one's still
    within the period."""
    return current + previous * (1.0 - elapsed)


def allowed(current: int, previous: int, elapsed: float, limit: int) -> bool:
    """Whether a request is within `limit`, `current` counting it already."""
    return estimate(current, previous, elapsed) <= limit


def retry_after(counted: int, previous: int, elapsed: float, limit: int, period: float) -> float:
    """Seconds until one more request would be allowed, when `counted` requests are counted
    in the current window (a refused one not among them) and `previous` in the one before."""
    if counted + 1 > limit:
        # Not within this window: in the next, this window's count is the weighted one,
        # and it must have fallen to what leaves room for the retry.
        rest_of_window = (1.0 - elapsed) * period
        needed = max(0.0, 1.0 - (limit - 1) / counted) if counted else 0.0
        return rest_of_window + needed * period
    # Within this window once the previous window's weight has fallen far enough.
    room = limit - counted - 1
    if previous <= room:
        return 0.0
    needed = 1.0 - room / previous
    return max(0.0, (needed - elapsed) * period)
