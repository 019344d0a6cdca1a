"""Idempotency keys: the first answer to a request, kept to be replayed to its retries.

The key is reserved (a row inserted) before the work starts, so two identical requests
racing do not both act: the second is told the first is in progress. Answers are kept for
IDEMPOTENCY_KEY_HOURS: a retry comes within minutes, and the table must not grow forever.
The API's `idempotent` decorator (pools/api/idempotency.py) is the one caller besides the
periodic purge.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from pools.models import IdempotencyRecord

KEY_MAX_LENGTH: int = IdempotencyRecord._meta.get_field("key").max_length  # type: ignore[assignment]


class IdempotencyConflict(Exception):
    """The key cannot be used for this request; `status` is the HTTP answer."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def idempotency_reserve(
    *, user: AbstractBaseUser, key: str, fingerprint: str, header: str
) -> tuple[IdempotencyRecord, bool]:
    """(our new record, True): do the work, then keep or forget the answer; or (the first
    request's record, False): replay its answer. IdempotencyConflict when the key was used
    for a different request or the first one is still being processed; `header` names the
    key in the messages."""
    try:
        with transaction.atomic():
            return IdempotencyRecord.objects.create(
                user=user, key=key, fingerprint=fingerprint
            ), True
    except IntegrityError:
        first = IdempotencyRecord.objects.get(user=user, key=key)
    if first.fingerprint != fingerprint:
        raise IdempotencyConflict(
            "idempotency_key_reused", f"This {header} was used for a different request.", 422
        )
    if first.status is None:
        raise IdempotencyConflict(
            "idempotency_in_progress",
            f"The first request with this {header} is still being processed.",
            409,
        )
    return first, False


def idempotency_keep(record: IdempotencyRecord, *, status: int, body: Any) -> None:
    """Keep the answer for the retries."""
    IdempotencyRecord.objects.filter(pk=record.pk).update(status=status, body=body)


def idempotency_forget(record: IdempotencyRecord) -> None:
    """No answer to keep (a crash, a server error): the client may try again."""
    record.delete()


def idempotency_records_purge(*, now: datetime) -> int:
    """Forget answers older than IDEMPOTENCY_KEY_HOURS; returns how many."""
    cutoff = now - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()
    return deleted
