"""Bookings over the API: book nodes (or GPUs of a model) of a pool for a window ahead,
decide, cancel; and a pool's calendar of bookings and loans."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework import serializers as S
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools import bookings
from pools.api.base import READ_ERRORS, WRITE_ERRORS, BaseView, Newest, error_responses, validated
from pools.api.fields import ActivePoolField, StrictCharField, StrictIntegerField
from pools.api.idempotency import idempotent
from pools.bookings.calendar import pool_calendar
from pools.common.roles import Capability
from pools.models import FREE_TEXT_MAX_LENGTH, Booking, BookingApproval, Pool

CALENDAR_MAX_DAYS = 400


class BookingSerializer(S.ModelSerializer):  # type: ignore[type-arg]
    source = S.SlugRelatedField(slug_field="name", read_only=True)
    destination = S.SlugRelatedField(slug_field="name", read_only=True)
    requested_by = S.SlugRelatedField(slug_field="username", read_only=True)
    nodes = S.ListField(source="node_names", child=S.CharField(), read_only=True)
    approvals = S.SerializerMethodField()
    loan = S.PrimaryKeyRelatedField(read_only=True, help_text="the move its start became")

    class Meta:
        model = Booking
        fields = [
            "id",
            "state",
            "source",
            "destination",
            "team",
            "nodes",
            "gpu_model",
            "gpus",
            "taken",
            "starts_at",
            "ends_at",
            "reason",
            "requested_by",
            "approvals_required",
            "approvals",
            "loan",
            "started_at",
            "start_delay_seconds",
            "start_blocked",
            "created_at",
            "decided_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_approvals(self, booking: Booking) -> list[dict[str, Any]]:
        return [
            {"approver": a.approver.get_username(), "comment": a.comment, "at": a.created_at}
            for a in booking.approvals.all()
        ]


def _pool_field(**options: Any) -> S.SlugRelatedField:  # type: ignore[type-arg]
    return ActivePoolField(**options)


class BookingAskSerializer(S.Serializer):  # type: ignore[type-arg]
    source = _pool_field(help_text="The pool the nodes are taken from.")
    destination = _pool_field(help_text="The pool they are lent to for the window.")
    team = StrictCharField(max_length=63, required=False, default="", allow_blank=True)
    nodes = S.ListField(
        child=StrictCharField(max_length=253), required=False, default=list, max_length=1000
    )
    gpu_model = StrictCharField(max_length=100, required=False, default="", allow_blank=True)
    gpus = StrictIntegerField(
        required=False, default=0, min_value=0, help_text="Or this many GPUs of gpu_model."
    )
    starts_at = S.DateTimeField()
    ends_at = S.DateTimeField()
    reason = StrictCharField(max_length=FREE_TEXT_MAX_LENGTH)


class BookingDecisionSerializer(S.Serializer):  # type: ignore[type-arg]
    reason = StrictCharField(
        max_length=FREE_TEXT_MAX_LENGTH, required=False, default="", allow_blank=True
    )


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("pool", str, description="Bookings out of or into this pool."),
            OpenApiParameter("state", str, description="One state (pending, approved, …)."),
        ],
        responses={200: BookingSerializer(many=True), **READ_ERRORS, **error_responses(400)},
        description="Bookings, the newest first.",
    ),
    retrieve=extend_schema(
        responses={200: BookingSerializer, **READ_ERRORS, **error_responses(404)}
    ),
)
class BookingViewSet(
    BaseView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    serializer_class = BookingSerializer
    pagination_class = Newest
    # Reading takes the view capability; a cancel is checked by the workflow (its requester
    # or a pool admin).
    capabilities = {
        "create": Capability.REQUEST_MOVE,
        "approve": Capability.APPROVE_MOVE,
        "reject": Capability.APPROVE_MOVE,
    }

    def get_queryset(self) -> QuerySet[Booking]:
        found = Booking.objects.select_related("source", "destination", "requested_by")
        found = found.prefetch_related(
            Prefetch("approvals", BookingApproval.objects.select_related("approver"))
        )
        params = self.request.query_params
        if pool := params.get("pool"):
            found = found.filter(source__name=pool) | found.filter(destination__name=pool)
        if state := params.get("state"):
            if state not in Booking.State.values:
                raise ValidationError({"state": f"One of {', '.join(Booking.State.values)}."})
            found = found.filter(state=state)
        return found

    def _answer(self, booking: Booking, code: int = status.HTTP_200_OK) -> Response:
        return Response(BookingSerializer(self.get_queryset().get(pk=booking.pk)).data, status=code)

    @extend_schema(
        request=BookingAskSerializer,
        responses={201: BookingSerializer, **WRITE_ERRORS},
        description="Book `nodes` of `source` (or `gpus` GPUs of `gpu_model`, whole nodes "
        "chosen at the start) for `team`, lent to `destination` from `starts_at` to "
        "`ends_at`. A 400 names each bad field (a window that ends before it starts or is in "
        "the past, a booking larger than the pool, …); a 409 lists each conflict with what it "
        "overlaps and the moment (`fields.conflicts`: another booking of the same nodes, a loan "
        "holding one then, the pool's floor broken). Approved by others (four eyes); at its "
        "start it becomes a loan, at its end the nodes return.",
    )
    @idempotent
    def create(self, request: Request) -> Response:
        data = validated(BookingAskSerializer, request)
        booking = bookings.booking_ask(
            user=request.user,
            source=data["source"],
            destination=data["destination"],
            team=data["team"],
            node_names=data["nodes"],
            gpu_model=data["gpu_model"],
            gpus=data["gpus"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            reason=data["reason"],
            now=timezone.now(),
        )
        return self._answer(booking, status.HTTP_201_CREATED)

    def _decide(self, request: Request, step: Any) -> Response:
        found = self.get_object()
        data = validated(BookingDecisionSerializer, request)
        return self._answer(step(found.pk, data["reason"]))

    @extend_schema(
        request=BookingDecisionSerializer,
        responses={200: BookingSerializer, **WRITE_ERRORS, **error_responses(404)},
        description="One approval (not one's own); the last one needed checks the conflicts "
        "again and holds the window (409 with the conflicts if another booking took it).",
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def approve(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(
            request,
            lambda pk, reason: bookings.booking_approve(
                pk, approver=request.user, reason=reason, now=timezone.now()
            ),
        )

    @extend_schema(
        request=BookingDecisionSerializer,
        responses={200: BookingSerializer, **WRITE_ERRORS, **error_responses(404)},
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(
            request,
            lambda pk, reason: bookings.booking_reject(
                pk, approver=request.user, reason=reason, now=timezone.now()
            ),
        )

    @extend_schema(
        request=BookingDecisionSerializer,
        responses={200: BookingSerializer, **WRITE_ERRORS, **error_responses(404)},
        description="Before its start, free its window; after it, end its loan now. Its "
        "requester or a pool admin.",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(
            request,
            lambda pk, reason: bookings.booking_cancel(
                pk, user=request.user, reason=reason, now=timezone.now()
            ),
        )


class CalendarQuery(S.Serializer):  # type: ignore[type-arg]
    since = S.DateTimeField(required=False, help_text="Default: now.")
    until = S.DateTimeField(required=False, help_text="Default: 5 weeks after `since`.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        since = attrs.setdefault("since", timezone.now())
        until = attrs.setdefault("until", since + timedelta(weeks=5))
        if until <= since:
            raise S.ValidationError({"until": "After `since`."})
        if until - since > timedelta(days=CALENDAR_MAX_DAYS):
            raise S.ValidationError({"until": f"At most {CALENDAR_MAX_DAYS} days after `since`."})
        return attrs


class PoolCalendarView(BaseView, APIView):
    @extend_schema(
        parameters=[CalendarQuery],
        responses={200: dict, **READ_ERRORS, **error_responses(400, 404)},
        description="The pool's bookings (out of it and into it) and loans that overlap "
        "[since, until), as bars: kind (booking or loan), id, title, start, end, state, "
        "source, destination, nodes, url.",
    )
    def get(self, request: Request, name: str) -> Response:
        pool = get_object_or_404(Pool.objects.active(), name=name)
        query = CalendarQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        bars = pool_calendar(
            pool, since=query.validated_data["since"], until=query.validated_data["until"]
        )
        return Response(
            {
                "pool": pool.name,
                "since": query.validated_data["since"],
                "until": query.validated_data["until"],
                "bars": [b.as_dict() for b in bars],
            }
        )
