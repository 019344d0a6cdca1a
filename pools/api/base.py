"""What every API view shares: the error responses it documents, cursor pages, the
permission class, and reading a body through a strict serializer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiResponse,
)
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request

from pools.api.errors import ErrorSerializer
from pools.api.permissions import HasCapability
from pools.common.roles import Capability


class QueuedSerializer(serializers.Serializer):  # type: ignore[type-arg]
    queued = serializers.BooleanField()


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    described = {
        400: "Invalid input",
        401: "No or bad credentials",
        403: "Your role does not allow this",
        404: "Not found",
        409: "A state conflict (a refused check or step)",
        415: "Unsupported media type",
        422: "Idempotency-Key reused",
        429: "Throttled",
        503: "The DCGM metrics this needs are unavailable (code metrics_unavailable)",
    }
    return {code: OpenApiResponse(ErrorSerializer, description=described[code]) for code in codes}


READ_ERRORS = error_responses(401, 403, 429)


WRITE_ERRORS = error_responses(400, 401, 403, 409, 415, 422, 429)


class StrictCursorPagination(CursorPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000

    def decode_cursor(self, request: Request) -> Any:
        # A cursor the client garbled is bad input (400), not a missing page (DRF says 404).
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: ["Invalid cursor."]}) from None


class ByName(StrictCursorPagination):
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "page_size"
    ordering = "name"


class Newest(StrictCursorPagination):
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "page_size"
    ordering = ("-id",)


class BaseView:
    permission_classes = [HasCapability]
    capabilities: dict[str, Capability] = {}


def validated(serializer_class: type, request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
