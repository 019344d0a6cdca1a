"""A pool's calendar: its bookings (into it or out of it) and its loans as bars over a range
of days, for the calendar page, the API and the iCalendar feed; and the feed's keys.

A loan's bar runs from its approval to its end (`loan_until`); a booking's over its window.
A booking that became its loan is shown once, as the booking. Two queries whatever the range.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from django.urls import reverse
from icalendar import Calendar, Event

from pools.models import Booking, CalendarFeed, MoveRequest, Pool
from pools.moves.rules import OPEN_LOAN_STATES

SHOWN_STATES = (*Booking.OPEN_STATES, Booking.State.ENDED, Booking.State.MISSED)
FEED_PREFIX = "gpc_"


@dataclass(frozen=True)
class Bar:
    kind: str  # "booking" or "loan"
    id: int
    title: str
    start: datetime
    end: datetime
    state: str
    source: str
    destination: str
    nodes: tuple[str, ...]
    url: str

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "id": self.id,
            "title": self.title,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "state": self.state,
            "source": self.source,
            "destination": self.destination,
            "nodes": list(self.nodes),
            "url": self.url,
        }


def pool_calendar(pool: Pool, *, since: datetime, until: datetime) -> list[Bar]:
    """The bars that overlap [since, until), by start."""
    bars = []
    bookings = (
        Booking.objects.filter(Q(source=pool) | Q(destination=pool))
        .filter(state__in=SHOWN_STATES, starts_at__lt=until, ends_at__gt=since)
        .select_related("source", "destination")
    )
    for b in bookings:
        bars.append(
            Bar(
                "booking",
                b.pk,
                f"#{b.pk} {b.team or b.requested_by_id}: {b.what} to {b.destination.name}",
                b.starts_at,
                b.ends_at,
                b.state,
                b.source.name,
                b.destination.name,
                tuple(b.taken or b.node_names),
                reverse("booking-detail", args=[b.pk]),
            )
        )
    loans = (
        MoveRequest.objects.filter(
            Q(destination=pool) | Q(items__source_pool=pool),
            loan_until__gt=since,
            decided_at__lt=until,
            state__in=OPEN_LOAN_STATES,
            booking__isnull=True,
        )
        .distinct()
        .select_related("destination")
        .prefetch_related("items__node", "items__source_pool")
    )
    for loan in loans:
        items = list(loan.items.all())
        assert loan.loan_until is not None and loan.decided_at is not None
        bars.append(
            Bar(
                "loan",
                loan.pk,
                f"loan #{loan.pk}: {len(items)} node{'' if len(items) == 1 else 's'} to "
                f"{loan.destination.name}",
                loan.decided_at,
                loan.loan_until,
                loan.state,
                ", ".join(sorted({i.source_pool.name for i in items if i.source_pool})),
                loan.destination.name,
                tuple(sorted(i.node.name for i in items)),
                reverse("move-detail", args=[loan.pk]),
            )
        )
    return sorted(bars, key=lambda bar: (bar.start, bar.kind, bar.id))


def calendar_ics(pool: Pool, bars: list[Bar], *, base_url: str) -> bytes:
    """The bars as an iCalendar (RFC 5545) document, one event each."""
    calendar = Calendar()
    calendar.add("prodid", "-//GPU node-pool portal//bookings//EN")
    calendar.add("version", "2.0")
    calendar.add("x-wr-calname", f"GPU pool {pool.name}")
    for bar in bars:
        event = Event()
        event.add("uid", f"{bar.kind}-{bar.id}@gpu-pools")
        event.add("summary", bar.title)
        event.add("dtstart", bar.start)
        event.add("dtend", bar.end)
        event.add("dtstamp", bar.start)
        event.add(
            "description",
            f"{bar.state}; from {bar.source} to {bar.destination}; "
            f"nodes: {', '.join(bar.nodes) or 'chosen at the start'}",
        )
        event.add("url", f"{base_url}{bar.url}")
        event.add("status", "TENTATIVE" if bar.state == "pending" else "CONFIRMED")
        calendar.add_component(event)
    return calendar.to_ical()


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def calendar_feed_create(*, user: AbstractBaseUser, pool: Pool) -> str:
    """A new feed key for `pool` (shown once): it reads that pool's feed and nothing else."""
    key = FEED_PREFIX + secrets.token_urlsafe(24)
    CalendarFeed.objects.create(user=user, pool=pool, key_hash=_hash(key))
    return key


def calendar_feed_pool(key: str, pool: Pool) -> bool:
    """Whether `key` opens `pool`'s feed: not revoked, and its owner still active."""
    return CalendarFeed.objects.filter(
        key_hash=_hash(key), pool=pool, revoked_at__isnull=True, user__is_active=True
    ).exists()


def calendar_feeds_revoke(*, user: AbstractBaseUser, pool: Pool, now: datetime) -> int:
    return CalendarFeed.objects.filter(user=user, pool=pool, revoked_at__isnull=True).update(
        revoked_at=now
    )
