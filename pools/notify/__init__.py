"""Notifications' two outside systems: an SMTP server (through Django's e-mail backend) and
a webhook. Each call has a timeout and raises NotificationFailed, saying whether a retry may
help; the Celery tasks (pools/tasks.py) retry, a bounded number of times."""

from __future__ import annotations

from django.conf import settings


def configured_channels() -> list[str]:
    """The channels a maintenance's or a booking's event goes out on: "email" and "webhook",
    each only when configured (NOTIFY_EMAIL, NOTIFY_WEBHOOK_URL)."""
    return [
        name
        for name, on in (("email", settings.NOTIFY_EMAIL), ("webhook", settings.NOTIFY_WEBHOOK_URL))
        if on
    ]
