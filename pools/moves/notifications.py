"""Notifications of the move workflow's events: who learns what, by e-mail and by webhook.

Both channels are off unless configured (NOTIFY_EMAIL, NOTIFY_WEBHOOK_URL). The Celery
tasks call these functions, one channel each, so a webhook that fails is retried without
sending the e-mails again; the move that announced the event never waits for either.
"""

from __future__ import annotations

import logging
from datetime import UTC

from django.conf import settings
from django.urls import reverse

from pools.common.cluster_access import cluster_path
from pools.common.roles import Capability, emails_of_those_who
from pools.core.notices import Audience, Event, MoveFacts, Notice, notice
from pools.models import MoveRequest
from pools.notify.mail import mail_send
from pools.notify.webhook import webhook_post

log = logging.getLogger(__name__)


def move_facts(move: MoveRequest) -> MoveFacts:
    path = cluster_path(reverse("move-detail", args=[move.pk]), move.destination.cluster)
    rejection = move.events.filter(action="move.rejected").values_list("message", flat=True)
    return MoveFacts(
        id=move.pk,
        kind=move.get_kind_display().lower(),
        state=move.get_state_display().lower(),
        destination=move.destination.name,
        requested_by=move.requested_by.get_username() if move.requested_by else None,
        reason=move.reason,
        nodes=move.items.count(),
        loan_until=move.loan_until.astimezone(UTC) if move.loan_until else None,
        last_comment=rejection.first() or "",
        url=f"{settings.PORTAL_URL}{path}" if settings.PORTAL_URL else path,
    )


def _notice(event: str, request_id: int) -> tuple[MoveRequest, Notice]:
    move = MoveRequest.objects.select_related("destination", "requested_by").get(pk=request_id)
    return move, notice(Event(event), move_facts(move))


def recipients(audience: Audience, move: MoveRequest) -> list[str]:
    """E-mail addresses: the requester's, every active approver's but the requester's
    (no self-approval, so no point telling them), or both."""
    user = move.requested_by
    requester = [user.email] if user is not None and user.is_active and user.email else []
    if audience is Audience.REQUESTER:
        return requester
    if audience is Audience.EVERYONE:
        return sorted({*requester, *recipients(Audience.APPROVERS, move)})
    return emails_of_those_who(Capability.APPROVE_MOVE, but=move.requested_by_id)


def notification_email(*, event: str, request_id: int) -> int:
    """Send the event's e-mails; the number sent. Raises NotificationFailed."""
    move, note = _notice(event, request_id)
    to = recipients(note.audience, move)
    sent = mail_send(subject=note.subject, text=note.text, recipients=to)
    log.info("move #%s %s: %d e-mail(s) sent", request_id, event, sent)
    return sent


def notification_webhook(*, event: str, request_id: int) -> None:
    """POST the event to the webhook. Raises NotificationFailed."""
    move, note = _notice(event, request_id)
    body = {
        "text": note.text,  # what Slack-compatible receivers show
        "event": note.event.value,
        "move": move.pk,
        "state": move.state,
        "destination": move.destination.name,
        "subject": note.subject,
    }
    assert settings.NOTIFY_WEBHOOK_URL is not None
    webhook_post(settings.NOTIFY_WEBHOOK_URL, body, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT)
    log.info("move #%s %s: webhook delivered", request_id, event)
