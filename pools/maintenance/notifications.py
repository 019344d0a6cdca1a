"""Notifications of a maintenance: a wave waiting for its step, a maintenance that paused by
itself (a drain past its deadline), and its end. They go to whoever started it and to the
pool admins (who steer maintenances), by e-mail, and to the webhook; each channel is off
unless configured (NOTIFY_EMAIL, NOTIFY_WEBHOOK_URL), as for moves."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.urls import reverse

from pools.common.cluster_access import cluster_path
from pools.common.roles import Capability, groups_granting
from pools.models import Maintenance
from pools.notify.mail import mail_send
from pools.notify.webhook import webhook_post

log = logging.getLogger(__name__)

EVENTS = {
    "held": "a wave is drained and waits for its step",
    "paused": "paused by itself",
    "done": "done",
    "cancelled": "cancelled",
}


def _text(event: str, maintenance: Maintenance) -> tuple[str, str]:
    path = cluster_path(
        reverse("maintenance-detail", args=[maintenance.pk]), maintenance.pool.cluster
    )
    url = f"{settings.PORTAL_URL}{path}" if settings.PORTAL_URL else path
    subject = f"Maintenance #{maintenance.pk} of {maintenance.pool.name}: {EVENTS[event]}"
    lines = [subject + ".", f"Why: {maintenance.reason}"]
    if event == "held":
        lines.append(maintenance.waiting)
    if event == "paused":
        lines.append(maintenance.paused_reason)
    lines.append(f"See {url}")
    return subject, "\n".join(line for line in lines if line)


def recipients(maintenance: Maintenance) -> list[str]:
    roles = groups_granting(Capability.EDIT_POOLS)
    admins = (
        get_user_model()
        .objects.filter(
            Q(is_superuser=True) | Q(groups__name__in=roles) | Q(pk=maintenance.started_by_id),
            is_active=True,
        )
        .exclude(email="")
        .distinct()
    )
    return sorted(set(admins.values_list("email", flat=True)))


def maintenance_email(*, event: str, maintenance_id: int) -> int:
    maintenance = Maintenance.objects.select_related("pool").get(pk=maintenance_id)
    subject, text = _text(event, maintenance)
    return mail_send(subject=subject, text=text, recipients=recipients(maintenance))


def maintenance_webhook(*, event: str, maintenance_id: int) -> None:
    maintenance = Maintenance.objects.select_related("pool").get(pk=maintenance_id)
    subject, text = _text(event, maintenance)
    body = {
        "text": text,
        "event": f"maintenance.{event}",
        "maintenance": maintenance.pk,
        "pool": maintenance.pool.name,
        "state": maintenance.state,
        "wave": maintenance.wave,
        "subject": subject,
    }
    assert settings.NOTIFY_WEBHOOK_URL is not None
    webhook_post(settings.NOTIFY_WEBHOOK_URL, body, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT)
    log.info("maintenance #%s %s: webhook delivered", maintenance_id, event)


SENDERS: dict[str, Callable[..., object]] = {
    "email": maintenance_email,
    "webhook": maintenance_webhook,
}
