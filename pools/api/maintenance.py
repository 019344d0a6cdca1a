"""A pool's maintenance headroom (how many of its nodes can be drained together now), and
maintenances in waves: start one, follow it, confirm a wave's step, pause, resume, cancel."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.api.base import READ_ERRORS, WRITE_ERRORS, BaseView, Newest, error_responses, validated
from pools.api.fields import ActivePoolField, StrictCharField, StrictIntegerField
from pools.api.idempotency import idempotent
from pools.api.permissions import HasCapability
from pools.core.headroom import BUDGET, DOWN, FLOOR, GANG, SHARED_BUDGETS
from pools.core.waves import (
    MAX_DRAIN_DEADLINE_SECONDS,
    MAX_STEP_LENGTH,
    MIN_DRAIN_DEADLINE_SECONDS,
)
from pools.maintenance import waves
from pools.maintenance.headroom import pool_headroom
from pools.models import FREE_TEXT_MAX_LENGTH, Maintenance, MaintenanceNode, Pool

S = serializers


class BlockerSerializer(S.Serializer):  # type: ignore[type-arg]
    kind = S.ChoiceField(
        choices=[BUDGET, GANG, SHARED_BUDGETS, FLOOR, DOWN],
        help_text="budget: a PodDisruptionBudget would refuse; gang: a running gang would lose "
        "a member; shared-budgets: a pod two budgets cover (never evicted); floor: the pool's "
        "min_nodes; down: a node already cordoned, NotReady or held by a move.",
    )
    name = S.CharField(help_text="the budget (namespace/name), the gang, the pool or the node")
    message = S.CharField()
    nodes = S.ListField(child=S.CharField(), help_text="the nodes it keeps from a drain")


class HeadroomSerializer(S.Serializer):  # type: ignore[type-arg]
    pool = S.CharField()
    nodes = S.IntegerField()
    in_service = S.IntegerField(help_text="nodes not cordoned, NotReady or held by a move")
    min_nodes = S.IntegerField()
    drainable_now = S.IntegerField(
        allow_null=True,
        help_text="nodes that can be drained together now; null when the disruption budgets "
        "could not be read (budgets_error says why)",
    )
    drainable_nodes = S.ListField(
        child=S.CharField(), help_text="which, in the order a drain takes them"
    )
    blockers = BlockerSerializer(many=True)
    budgets_error = S.CharField(allow_null=True)


class PoolHeadroomView(BaseView, APIView):
    @extend_schema(
        responses={200: HeadroomSerializer, **READ_ERRORS, **error_responses(404)},
        description="How many of the pool's nodes can be drained together now (for a driver "
        "or firmware upgrade), and what keeps more: each disruption budget that would refuse, "
        "each running gang that would lose a member, the pool's floor, the nodes already "
        "down. The budgets are read from the API server (kept BUDGETS_CACHE_SECONDS).",
    )
    def get(self, request: Request, name: str) -> Response:
        pool = get_object_or_404(Pool.objects.active(), name=name)
        return Response(HeadroomSerializer(pool_headroom(pool).as_dict()).data)


class MaintenanceNodeSerializer(S.ModelSerializer):  # type: ignore[type-arg]
    node = S.CharField(source="node.name", read_only=True)
    evictions_refused = S.SerializerMethodField(
        help_text="pod -> the disruption budget's words, for pods whose eviction it refused"
    )

    class Meta:
        model = MaintenanceNode
        fields = [
            "node",
            "wave",
            "state",
            "cordoned_by_portal",
            "operator_cordon",
            "drained_at",
            "done_at",
            "evictions_refused",
        ]
        read_only_fields = fields

    def get_evictions_refused(self, row: MaintenanceNode) -> dict[str, str]:
        return {pod: r["message"] for pod, r in (row.refusals or {}).items()}


class MaintenanceSerializer(S.ModelSerializer):  # type: ignore[type-arg]
    pool = S.SlugRelatedField(slug_field="name", read_only=True)
    started_by = S.SlugRelatedField(slug_field="username", read_only=True)
    nodes = MaintenanceNodeSerializer(many=True, read_only=True)
    waiting = S.CharField(read_only=True, help_text="why it does not go on now ('' when it does)")

    class Meta:
        model = Maintenance
        fields = [
            "id",
            "pool",
            "state",
            "reason",
            "started_by",
            "wave_size",
            "wave_percent",
            "hold",
            "hold_label",
            "step",
            "drain_deadline_seconds",
            "wave",
            "confirmed_wave",
            "waiting",
            "paused_reason",
            "cancel_requested",
            "created_at",
            "finished_at",
            "nodes",
        ]
        read_only_fields = fields


class MaintenanceStartSerializer(S.Serializer):  # type: ignore[type-arg]
    pool = ActivePoolField()
    nodes = S.ListField(
        child=StrictCharField(max_length=253),
        required=False,
        max_length=10_000,
        help_text="The pool's nodes to take; or `count`; neither: every node of the pool.",
    )
    count = StrictIntegerField(
        required=False, min_value=1, help_text="Take the pool's first `count` nodes by name."
    )
    wave_size = StrictIntegerField(min_value=1, help_text="At most this many nodes at a time.")
    wave_percent = S.BooleanField(
        default=False, help_text="wave_size is a per cent of the maintenance's nodes."
    )
    hold = S.ChoiceField(choices=Maintenance.Hold.choices, default=Maintenance.Hold.CONFIRM)
    hold_label = StrictCharField(
        max_length=400,
        required=False,
        default="",
        allow_blank=True,
        help_text="For hold=label: `key=value`, or `key` (it appears or changes from its value "
        "at the drain), on every node of the wave.",
    )
    step = StrictCharField(
        max_length=MAX_STEP_LENGTH,
        required=False,
        default="",
        allow_blank=True,
        help_text="For hold=confirm: what the operator confirms, e.g. 'driver upgraded'.",
    )
    drain_deadline_seconds = StrictIntegerField(
        default=1800,
        min_value=MIN_DRAIN_DEADLINE_SECONDS,
        max_value=MAX_DRAIN_DEADLINE_SECONDS,
    )
    reason = StrictCharField(max_length=FREE_TEXT_MAX_LENGTH)


class ConfirmSerializer(S.Serializer):  # type: ignore[type-arg]
    wave = StrictIntegerField(min_value=1, help_text="The wave whose step is done.")


class PauseSerializer(S.Serializer):  # type: ignore[type-arg]
    reason = StrictCharField(
        max_length=FREE_TEXT_MAX_LENGTH, required=False, default="", allow_blank=True
    )


class MaintainsPools(HasCapability):
    """Reading maintenances takes the view capability; any change is for pool admins."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        if request.method not in SAFE_METHODS and not waves.can_maintain(request.user):
            self.message = "Only pool admins run maintenances."
            return False
        return True


STEERING = {**WRITE_ERRORS, **error_responses(404)}


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("pool", str, description="Only this pool's maintenances."),
            OpenApiParameter("state", str, description="running, paused, done or cancelled."),
        ],
        responses={200: MaintenanceSerializer(many=True), **READ_ERRORS, **error_responses(400)},
        description="Maintenances, the newest first, each with its nodes' waves and states.",
    ),
    retrieve=extend_schema(
        responses={200: MaintenanceSerializer, **READ_ERRORS, **error_responses(404)}
    ),
)
class MaintenanceViewSet(
    BaseView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    serializer_class = MaintenanceSerializer
    pagination_class = Newest
    permission_classes = [MaintainsPools]

    def get_queryset(self) -> QuerySet[Maintenance]:
        found = Maintenance.objects.select_related("pool", "started_by").prefetch_related(
            Prefetch("nodes", MaintenanceNode.objects.select_related("node"))
        )
        if pool := self.request.query_params.get("pool"):
            found = found.filter(pool__name=pool)
        if state := self.request.query_params.get("state"):
            if state not in Maintenance.State.values:
                raise ValidationError({"state": f"One of {', '.join(Maintenance.State.values)}."})
            found = found.filter(state=state)
        return found

    def _answer(self, maintenance: Maintenance, code: int = status.HTTP_200_OK) -> Response:
        return Response(
            MaintenanceSerializer(self.get_queryset().get(pk=maintenance.pk)).data, status=code
        )

    @extend_schema(
        request=MaintenanceStartSerializer,
        responses={201: MaintenanceSerializer, **WRITE_ERRORS},
        description="Start a maintenance: the nodes are cordoned and drained in waves of at "
        "most wave_size (or that per cent), each within the pool's headroom now (disruption "
        "budgets, running gangs, the floor), held until the step is confirmed (hold=confirm) "
        "or the label says so (hold=label), then uncordoned before the next wave. Pool admins "
        "only; one maintenance at a time per pool (409 maintenance_running). Send "
        "Idempotency-Key to make retries safe.",
    )
    @idempotent
    def create(self, request: Request) -> Response:
        data = validated(MaintenanceStartSerializer, request)
        maintenance = waves.maintenance_start(
            pool=data["pool"],
            user=request.user,
            reason=data["reason"],
            wave_size=data["wave_size"],
            wave_percent=data["wave_percent"],
            hold=data["hold"],
            hold_label=data["hold_label"],
            step=data["step"],
            drain_deadline_seconds=data["drain_deadline_seconds"],
            nodes=data.get("nodes"),
            count=data.get("count"),
        )
        return self._answer(maintenance, status.HTTP_201_CREATED)

    @extend_schema(
        request=ConfirmSerializer,
        responses={200: MaintenanceSerializer, **STEERING},
        description="The step is done on the wave named (hold=confirm): it is uncordoned and "
        "the next wave begins. A wave that is not the one waiting is refused (409 stale_wave).",
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def confirm(self, request: Request, pk: str | None = None) -> Response:
        found = self.get_object()
        data = validated(ConfirmSerializer, request)
        return self._answer(
            waves.maintenance_confirm(found.pk, wave=data["wave"], user=request.user)
        )

    @extend_schema(
        request=PauseSerializer,
        responses={200: MaintenanceSerializer, **STEERING},
        description="Stop where it stands (the wave's nodes stay cordoned) until resumed.",
    )
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str | None = None) -> Response:
        found = self.get_object()
        data = validated(PauseSerializer, request)
        return self._answer(
            waves.maintenance_pause(found.pk, user=request.user, reason=data["reason"])
        )

    @extend_schema(
        request=None,
        responses={200: MaintenanceSerializer, **STEERING},
        description="Go on; a drain under way gets its whole deadline again.",
    )
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        found = self.get_object()
        return self._answer(
            waves.maintenance_resume(found.pk, user=request.user, now=timezone.now())
        )

    @extend_schema(
        request=None,
        responses={200: MaintenanceSerializer, **STEERING},
        description="End it: the maintenance's cordons on the wave under way are lifted (an "
        "operator's own stay), and the nodes whose wave had not come are left alone.",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        found = self.get_object()
        return self._answer(waves.maintenance_cancel(found.pk, user=request.user))
