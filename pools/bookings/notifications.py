"""Notifications of bookings: approvers learn that one waits; its requester that it was
decided, starts in a day and in an hour, started, ended, expired or was missed; both when its
nodes are not free at its start, with the reason. By e-mail and webhook, each only when
configured (NOTIFY_EMAIL, NOTIFY_WEBHOOK_URL), as for moves."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.urls import reverse

from pools.common.cluster_access import cluster_path
from pools.common.events import announce_booking_event_after_commit
from pools.common.roles import Capability, emails_of_those_who
from pools.models import Booking
from pools.notify.mail import mail_send
from pools.notify.webhook import webhook_post

log = logging.getLogger(__name__)
APPROVERS, REQUESTER, BOTH = "approvers", "requester", "both"
# event -> (what the subject says, who is told)
EVENTS: dict[str, tuple[str, str]] = {
    "requested": ("waits for your approval", APPROVERS),
    "approved": ("approved: its window is held", REQUESTER),
    "rejected": ("rejected", REQUESTER),
    "expired": ("expired: it was not approved before its start", REQUESTER),
    "day_ahead": ("starts within a day", REQUESTER),
    "hour_ahead": ("starts within the hour", REQUESTER),
    "started": ("started: its nodes are being lent", REQUESTER),
    "start_blocked": ("cannot start: its nodes are not free", BOTH),
    "missed": ("missed: its window passed before its nodes were free", BOTH),
    "ended": ("ended: its nodes went back", REQUESTER),
}


def announce_booking_after_commit(booking_id: int, event: str) -> None:
    assert event in EVENTS, event
    announce_booking_event_after_commit(booking_id, event)


def _text(event: str, booking: Booking) -> tuple[str, str]:
    path = cluster_path(reverse("booking-detail", args=[booking.pk]), booking.destination.cluster)
    url = f"{settings.PORTAL_URL}{path}" if settings.PORTAL_URL else path
    subject = f"Booking #{booking.pk} of {booking.source.name}: {EVENTS[event][0]}"
    lines = [
        subject + ".",
        f"{booking.what} of {booking.source.name} into {booking.destination.name} for "
        f"{booking.team or 'no team'}, {booking.starts_at:%Y-%m-%d %H:%M} to "
        f"{booking.ends_at:%Y-%m-%d %H:%M} UTC.",
        f"Why: {booking.reason}",
    ]
    if event in ("start_blocked", "missed") and booking.start_blocked:
        lines.append(f"What stops it: {booking.start_blocked}")
    lines.append(f"See {url}")
    return subject, "\n".join(lines)


def recipients(event: str, booking: Booking) -> list[str]:
    audience = EVENTS[event][1]
    user = booking.requested_by
    found = set()
    if audience in (REQUESTER, BOTH) and user.is_active and user.email:
        found.add(user.email)
    if audience in (APPROVERS, BOTH):
        found |= set(emails_of_those_who(Capability.APPROVE_MOVE, but=booking.requested_by_id))
    return sorted(found)


def _booking(booking_id: int) -> Booking:
    return Booking.objects.select_related("source", "destination", "requested_by").get(
        pk=booking_id
    )


def booking_email(*, event: str, booking_id: int) -> int:
    booking = _booking(booking_id)
    subject, text = _text(event, booking)
    return mail_send(subject=subject, text=text, recipients=recipients(event, booking))


def booking_webhook(*, event: str, booking_id: int) -> None:
    booking = _booking(booking_id)
    subject, text = _text(event, booking)
    body = {
        "text": text,
        "event": f"booking.{event}",
        "booking": booking.pk,
        "source": booking.source.name,
        "destination": booking.destination.name,
        "state": booking.state,
        "starts_at": booking.starts_at.isoformat(),
        "ends_at": booking.ends_at.isoformat(),
        "subject": subject,
    }
    assert settings.NOTIFY_WEBHOOK_URL is not None
    webhook_post(settings.NOTIFY_WEBHOOK_URL, body, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT)
    log.info("booking #%s %s: webhook delivered", booking_id, event)


SENDERS: dict[str, Callable[..., object]] = {"email": booking_email, "webhook": booking_webhook}
