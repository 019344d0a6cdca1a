"""Send one e-mail per recipient through Django's e-mail backend (SMTP in production, the
locmem backend in tests): recipients never see each other's address."""

from __future__ import annotations

import smtplib
from collections.abc import Sequence

from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from pools.notify.errors import NotificationFailed


def mail_send(*, subject: str, text: str, recipients: Sequence[str]) -> int:
    messages = [
        EmailMessage(subject=subject, body=text, from_email=settings.DEFAULT_FROM_EMAIL, to=[to])
        for to in recipients
    ]
    if not messages:
        return 0
    try:
        with get_connection(timeout=settings.EMAIL_TIMEOUT) as connection:
            return connection.send_messages(messages) or 0
    except (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused) as exc:
        raise NotificationFailed(f"the mail server refused: {exc}", transient=False) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise NotificationFailed(
            f"mail not sent: {type(exc).__name__}: {exc}", transient=True
        ) from None
