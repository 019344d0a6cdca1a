"""One error shape for every API failure:
{"error": {"code": "...", "message": "...", "fields": {...}}}."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, ValidationError
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from pools.common.errors import Refused

log = logging.getLogger("pools.api")

CODES = {
    exceptions.ParseError: "malformed_request",
    exceptions.ValidationError: "validation",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
}


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _flatten(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return {k: _flatten_list(v) for k, v in detail.items()}
    return {"non_field_errors": _flatten_list(detail)}


def _flatten_list(value: Any) -> Any:
    if isinstance(value, list):
        return [str(v) if not isinstance(v, dict) else _flatten(v) for v in value]
    if isinstance(value, dict):
        return _flatten(value)
    return [str(value)]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Refused):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status)
    if isinstance(exc, ValidationError):  # a model's full_clean() inside a service
        fields = (
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
        return Response(
            error_body(
                "validation", " ".join(f"{k}: {' '.join(v)}" for k, v in fields.items()), fields
            ),
            status=400,
        )
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body("body_too_large", f"The request body is larger than {_limit()}."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_handler(exc, context)
    if response is None:
        return _server_error(exc, context)
    code = next((c for cls, c in CODES.items() if isinstance(exc, cls)), "error")
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        message = "; ".join(
            f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in fields.items()
        )
        response.data = error_body(code, message or "Invalid input.", fields)
    else:
        response.data = error_body(code, str(getattr(exc, "detail", exc)))
    if response.status_code == status.HTTP_401_UNAUTHORIZED:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


def _limit() -> str:
    return f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes"


def _server_error(exc: Exception, context: dict[str, Any]) -> Response:
    """A bug: logged with its traceback (the log line carries the request id), answered in
    the API's shape so a client's error handling holds; no detail of the bug leaves."""
    request = context.get("request")
    log.error(
        "unexpected error in %s %s",
        getattr(request, "method", "?"),
        getattr(request, "path", "?"),
        exc_info=exc,
    )
    return Response(
        error_body("server_error", "Unexpected error on the server; it has been logged."),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


class ErrorDetailSerializer(serializers.Serializer):  # type: ignore[type-arg]
    code = serializers.CharField(
        help_text="Stable, for programs: capacity_floor, "
        "state_conflict, self_approval, validation, not_found, …"
    )
    message = serializers.CharField(help_text="For people.")
    fields = serializers.DictField(help_text="Per field (or per check) details.")


class ErrorSerializer(serializers.Serializer):  # type: ignore[type-arg]
    error = ErrorDetailSerializer()
