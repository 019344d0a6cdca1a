"""Idempotency-Key on POSTs that create or act: a retried request gets the first answer.

The key is reserved (inserted) before the work starts, so two identical requests racing do
not both act: the second one waits for nothing and is told the first is in progress.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from rest_framework.request import Request
from rest_framework.response import Response

from pools.api.errors import error_body
from pools.models import IdempotencyRecord

HEADER = "Idempotency-Key"


def _fingerprint(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, default=str) if request.data else ""
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def idempotent(view: Callable[..., Response]) -> Callable[..., Response]:
    @functools.wraps(view)
    def wrapped(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER, "").strip()
        if not key:
            return view(self, request, *args, **kwargs)
        if len(key) > 255:
            return Response(
                error_body(
                    "validation", f"{HEADER} is at most 255 characters.", {HEADER: ["too long"]}
                ),
                status=400,
            )
        fingerprint = _fingerprint(request)
        try:
            with transaction.atomic():
                record = IdempotencyRecord.objects.create(
                    user=request.user, key=key, fingerprint=fingerprint
                )
        except IntegrityError:
            first = IdempotencyRecord.objects.get(user=request.user, key=key)
            if first.fingerprint != fingerprint:
                return Response(
                    error_body(
                        "idempotency_key_reused",
                        f"This {HEADER} was used for a different request.",
                        {HEADER: [key]},
                    ),
                    status=422,
                )
            if first.status is None:
                return Response(
                    error_body(
                        "idempotency_in_progress",
                        f"The first request with this {HEADER} is still being processed.",
                        {HEADER: [key]},
                    ),
                    status=409,
                )
            response = Response(first.body, status=first.status)
            response["Idempotent-Replayed"] = "true"
            return response
        try:
            response = view(self, request, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 -- refusals are answers too, and are kept
            try:
                response = self.handle_exception(exc)  # the API's own error shape
            except Exception:
                record.delete()  # a crash is not an answer: the client may try again
                raise
        if response.status_code >= 500:
            record.delete()
        else:
            IdempotencyRecord.objects.filter(pk=record.pk).update(
                status=response.status_code, body=response.data
            )
        return response

    return wrapped


def idempotency_records_purge(*, now: datetime) -> int:
    """Forget answers older than IDEMPOTENCY_KEY_HOURS: a retry comes within minutes, and
    the table must not grow forever."""
    cutoff = now - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()
    return deleted
