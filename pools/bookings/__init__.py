"""Bookings: nodes of a pool held for a team over a window in the future, approved with four
eyes, lent at the start and returned at the end through the move workflow's own loans.

- `requests`: ask, approve, reject, cancel (conflicts checked at the ask and the approval);
- `holdings`: what holds a pool's nodes over time (bookings, open loans);
- `start`: the beat's part: expire, start, retry a blocked start, end, tell ahead;
- `calendar`: a pool's bookings and loans as bars, and its iCalendar feed;
- `notifications`: who is told what.
"""

from pools.bookings.requests import (
    BookingConflicts,
    booking_approve,
    booking_ask,
    booking_cancel,
    booking_conflicts_of,
    booking_reject,
)
from pools.bookings.start import bookings_advance

__all__ = [
    "BookingConflicts",
    "booking_approve",
    "booking_ask",
    "booking_cancel",
    "booking_conflicts_of",
    "booking_reject",
    "bookings_advance",
]
