"""The drills over the API: a drill with its result, and what starting one takes."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework import serializers as S
from rest_framework.request import Request
from rest_framework.response import Response

from pools import drills
from pools.api.base import READ_ERRORS, WRITE_ERRORS, BaseView, Newest, error_responses, validated
from pools.api.fields import ActivePoolField, StrictCharField, StrictIntegerField
from pools.api.idempotency import idempotent
from pools.api.permissions import HasCapability
from pools.core.drills import MAX_HOLD_SECONDS
from pools.models import Drill

DEFAULT_HOLD_SECONDS = 60


class DrillCheckSerializer(S.Serializer):  # type: ignore[type-arg]
    name = S.CharField()
    title = S.CharField()
    status = S.ChoiceField(choices=["pass", "fail", "unknown"])
    detail = S.CharField()


class DrillSerializer(S.ModelSerializer):  # type: ignore[type-arg]
    pool = S.SlugRelatedField(slug_field="name", read_only=True)
    node = StrictCharField(source="node_name", read_only=True)
    started_by = S.SlugRelatedField(slug_field="username", read_only=True)
    checks = DrillCheckSerializer(many=True, read_only=True)
    observed = S.DictField(
        read_only=True, help_text="What the drill saw before and during the hold, by kind."
    )

    class Meta:
        model = Drill
        fields = [
            "id",
            "kind",
            "pool",
            "node",
            "state",
            "hold_seconds",
            "started_by",
            "started_at",
            "ends_at",
            "finished_at",
            "checks",
            "observed",
            "error",
        ]
        read_only_fields = fields


class DrillStartSerializer(S.Serializer):  # type: ignore[type-arg]
    kind = S.ChoiceField(choices=Drill.Kind.choices)
    pool = ActivePoolField()
    node = StrictCharField(
        max_length=253,
        required=False,
        default="",
        allow_blank=True,
        help_text="A node of the pool (node_down, gpu_fault); none for node_joins, no_room and "
        "job_timeout, which make their own node or pod.",
    )
    hold_seconds = StrictIntegerField(
        default=DEFAULT_HOLD_SECONDS,
        max_value=MAX_HOLD_SECONDS,
        help_text="How long the change lasts; node_joins needs at least one inventory sync "
        "(INVENTORY_SYNC_SECONDS).",
    )


class RunsDrills(HasCapability):
    """Reading drills takes the view capability; starting one is for those who run drills."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        if getattr(view, "action", None) == "create" and not drills.can_run_drills(request.user):
            self.message = "Only pool admins run drills."
            return False
        return True


@extend_schema_view(
    list=extend_schema(
        parameters=[OpenApiParameter("pool", str, description="Only this pool's drills.")],
        responses={200: DrillSerializer(many=True), **READ_ERRORS, **error_responses(400)},
        description="Drills, the newest first, with their state and checks.",
    ),
    retrieve=extend_schema(responses={200: DrillSerializer, **READ_ERRORS, **error_responses(404)}),
)
class DrillViewSet(
    BaseView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    serializer_class = DrillSerializer
    pagination_class = Newest
    permission_classes = [RunsDrills]

    def get_queryset(self) -> QuerySet[Drill]:
        found = Drill.objects.select_related("pool", "started_by")
        if pool := self.request.query_params.get("pool"):
            found = found.filter(pool__name=pool)
        return found

    @extend_schema(
        request=DrillStartSerializer,
        responses={201: DrillSerializer, **WRITE_ERRORS},
        description="Start a drill on a pool: node_down (cordon a node), gpu_fault (an XID "
        "on a node's GPU 0, on the cluster simulator), node_joins (add an unassigned GPU "
        "node) or no_room (a probe pod asking for one GPU more than any node of the pool has "
        "free: is it pending for want of GPUs, on the pending list and in the fit check?) or "
        "job_timeout (a probe pod past a 15 s activeDeadlineSeconds: is it reported as a "
        "timeout?). "
        "It runs on a worker, ends by `ends_at`, restores the cluster, and records "
        "its checks. Pool admins only; one drill at a time per pool (409 drill_running). "
        "Send Idempotency-Key to make retries safe.",
    )
    @idempotent
    def create(self, request: Request) -> Response:
        data = validated(DrillStartSerializer, request)
        drill = drills.drill_start(
            pool=data["pool"],
            kind=data["kind"],
            node_name=data["node"],
            hold_seconds=data["hold_seconds"],
            user=request.user,
            now=timezone.now(),
        )
        return Response(
            DrillSerializer(self.get_queryset().get(pk=drill.pk)).data,
            status=status.HTTP_201_CREATED,
        )
