"""The drills over the API: list them with their results, read one, start one (pool admins,
asked of pools.drills.can_run_drills as the page asks). Thin: parse, call pools.drills."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from pools import drills
from pools.api import drill_serializers as s
from pools.api.idempotency import idempotent
from pools.api.permissions import HasCapability
from pools.api.views import READ_ERRORS, WRITE_ERRORS, BaseView, Newest, _valid, errors
from pools.models import Drill


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
        responses={200: s.DrillSerializer(many=True), **READ_ERRORS, **errors(400)},
        description="Drills, the newest first, with their state and checks.",
    ),
    retrieve=extend_schema(responses={200: s.DrillSerializer, **READ_ERRORS, **errors(404)}),
)
class DrillViewSet(
    BaseView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    serializer_class = s.DrillSerializer
    pagination_class = Newest
    permission_classes = [RunsDrills]

    def get_queryset(self) -> QuerySet[Drill]:
        found = Drill.objects.select_related("pool", "started_by")
        if pool := self.request.query_params.get("pool"):
            found = found.filter(pool__name=pool)
        return found

    @extend_schema(
        request=s.DrillStartSerializer,
        responses={201: s.DrillSerializer, **WRITE_ERRORS},
        description="Start a drill on a pool: node_down (cordon a node), gpu_fault (an XID "
        "on a node's GPU 0, on the cluster simulator) or node_joins (add an unassigned GPU "
        "node). It runs on a worker, ends by `ends_at`, restores the cluster, and records "
        "its checks. Pool admins only; one drill at a time per pool (409 drill_running). "
        "Send Idempotency-Key to make retries safe.",
    )
    @idempotent
    def create(self, request: Request) -> Response:
        data = _valid(s.DrillStartSerializer, request)
        drill = drills.drill_start(
            pool=data["pool"],
            kind=data["kind"],
            node_name=data["node"],
            hold_seconds=data["hold_seconds"],
            user=request.user,
            now=timezone.now(),
        )
        return Response(
            s.DrillSerializer(self.get_queryset().get(pk=drill.pk)).data,
            status=status.HTTP_201_CREATED,
        )
