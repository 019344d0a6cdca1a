"""Idempotency-Key on POSTs that create or act: a retried request gets the first answer
(pools.common.idempotency keeps it)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from pools.api.errors import error_body
from pools.common.idempotency import (
    KEY_MAX_LENGTH,
    IdempotencyConflict,
    idempotency_forget,
    idempotency_keep,
    idempotency_reserve,
)
from pools.models import IdempotencyRecord

HEADER = "Idempotency-Key"
View = Callable[..., Response]


def _fingerprint(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, default=str) if request.data else ""
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def _replay(first: IdempotencyRecord) -> Response:
    response = Response(first.body, status=first.status)
    response["Idempotent-Replayed"] = "true"
    return response


def _answer(
    view: View, viewset: Any, record: IdempotencyRecord, *args: Any, **kwargs: Any
) -> Response:
    """Run the view once and keep its answer; refusals are answers too, a crash is not."""
    try:
        response = view(viewset, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- refusals are answers too, and are kept
        try:
            response = viewset.handle_exception(exc)  # the API's own error shape
        except Exception:
            idempotency_forget(record)
            raise
    if response.status_code >= 500:
        idempotency_forget(record)
    else:
        idempotency_keep(record, status=response.status_code, body=response.data)
    return response


def idempotent(view: View) -> View:
    @functools.wraps(view)
    def wrapped(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER, "").strip()
        if not key:
            return view(self, request, *args, **kwargs)
        if len(key) > KEY_MAX_LENGTH:
            message = f"{HEADER} is at most {KEY_MAX_LENGTH} characters."
            return Response(error_body("validation", message, {HEADER: ["too long"]}), status=400)
        try:
            record, reserved = idempotency_reserve(
                user=request.user, key=key, fingerprint=_fingerprint(request), header=HEADER
            )
        except IdempotencyConflict as exc:
            return Response(error_body(exc.code, exc.message, {HEADER: [key]}), status=exc.status)
        if not reserved:
            return _replay(record)
        return _answer(view, self, record, request, *args, **kwargs)

    return wrapped
