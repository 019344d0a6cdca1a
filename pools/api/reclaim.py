"""Reclaiming idle GPUs over the API: a pool's policy and its candidates, the reclaims (file,
approve, reject), and the held-idle GPU-hours of each team."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework import serializers as S
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools import reclaim
from pools.api.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BaseView,
    Newest,
    error_responses,
    validated,
)
from pools.api.fields import StrictCharField, StrictIntegerField
from pools.api.idempotency import idempotent
from pools.common.roles import Capability
from pools.models import FREE_TEXT_MAX_LENGTH, Pool, Reclaim, ReclaimPolicy
from pools.reclaim import requests as reclaim_requests


class StrictFloatField(S.FloatField):
    """A number, never a string that looks like one."""

    def to_internal_value(self, data: object) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class PolicySerializer(S.ModelSerializer):  # type: ignore[type-arg]
    below_percent = StrictFloatField(help_text="Held under this utilisation (0 to 100 %)")
    for_hours = StrictIntegerField(help_text="for this many hours (1 to 168): a candidate.")
    grace_hours = StrictIntegerField(help_text="Hours its owner has to answer (0 to 168).")
    enabled = S.BooleanField()

    class Meta:
        model = ReclaimPolicy
        fields = ["enabled", "below_percent", "for_hours", "grace_hours", "updated_at"]
        read_only_fields = ["updated_at"]


class PoolReclaimView(BaseView, APIView):
    capabilities = {"PUT": Capability.EDIT_POOLS}

    @extend_schema(
        responses={200: dict, **READ_ERRORS, **error_responses(404)},
        description="The pool's reclaim policy (off by default) and, when it is on, its "
        "candidates: running pods holding GPU units whose busiest GPU stayed under the "
        "threshold for the window, the most GPU-hours first, each with its owner (team, "
        "namespace, contact annotation, its gang), the hours held idle over the last week, "
        "and whether it opted out. `metrics_error` says why there are none when Prometheus "
        "cannot answer. `reclaim` is the id of its open reclaim (see /api/v1/reclaims/), if any.",
    )
    def get(self, request: Request, name: str) -> Response:
        pool = get_object_or_404(Pool.objects.active(), name=name)
        found = reclaim.pool_reclaim_candidates(pool)
        open_ones = dict(
            Reclaim.objects.filter(pool=pool, finished_at__isnull=True).values_list("pod_uid", "pk")
        )
        return Response(
            {
                "pool": pool.name,
                "policy": PolicySerializer(found.policy).data,
                "candidates": [
                    {**c.as_dict(), "reclaim": open_ones.get(c.pod.uid)} for c in found.candidates
                ],
                "metrics_error": found.metrics_error,
            }
        )

    @extend_schema(
        request=PolicySerializer,
        responses={200: PolicySerializer, **WRITE_ERRORS, **error_responses(404)},
        description="Set the pool's reclaim policy (pool admins; audited). A threshold "
        "outside 0 to 100 % or hours outside their range are a 400 naming the field.",
    )
    def put(self, request: Request, name: str) -> Response:
        pool = get_object_or_404(Pool.objects.active(), name=name)
        data = validated(PolicySerializer, request)
        policy = reclaim.reclaim_policy_set(pool=pool, user=request.user, **data)
        return Response(PolicySerializer(policy).data)


class TeamsIdleView(BaseView, APIView):
    @extend_schema(
        responses={200: dict, **READ_ERRORS},
        description="Held-idle GPU-hours per team (its pods' team label, else their "
        "namespace) over the last 7 and 30 days: hours a pod's busiest GPU was under 1 %, "
        "times the GPU units it held. `metrics_error` says why there are none.",
    )
    def get(self, request: Request) -> Response:
        teams, error = reclaim.teams_idle(now=timezone.now())
        return Response(
            {
                "teams": [
                    {
                        "team": t.team,
                        "gpu_hours_7d": t.gpu_hours_7d,
                        "gpu_hours_30d": t.gpu_hours_30d,
                        "pods": t.pods,
                    }
                    for t in teams
                ],
                "metrics_error": error,
            }
        )


class ReclaimSerializer(S.ModelSerializer):  # type: ignore[type-arg]
    pool = S.SlugRelatedField(slug_field="name", read_only=True)
    requested_by = S.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = S.SlugRelatedField(slug_field="username", read_only=True)
    waiting = S.CharField(
        source="refused",
        read_only=True,
        help_text="while approved: what the eviction waits for (the budget's words)",
    )

    class Meta:
        model = Reclaim
        fields = [
            "id",
            "pool",
            "namespace",
            "pod",
            "pod_uid",
            "node_name",
            "units",
            "team",
            "contact",
            "owner",
            "idle_hours",
            "gpu_hours",
            "state",
            "noticed_at",
            "grace_until",
            "last_seen_idle_at",
            "reason",
            "requested_by",
            "requested_at",
            "decided_by",
            "decided_at",
            "decision_reason",
            "evict_deadline",
            "waiting",
            "finished_at",
            "outcome",
        ]
        read_only_fields = fields


class ReclaimReasonSerializer(S.Serializer):  # type: ignore[type-arg]
    reason = StrictCharField(
        max_length=FREE_TEXT_MAX_LENGTH, required=False, default="", allow_blank=True
    )


class ReclaimRejectSerializer(S.Serializer):  # type: ignore[type-arg]
    reason = StrictCharField(max_length=FREE_TEXT_MAX_LENGTH, help_text="Why the pod is kept.")


DECIDING = {**WRITE_ERRORS, **error_responses(404)}


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("pool", str, description="Only this pool's reclaims."),
            OpenApiParameter("state", str, description="noticed, due, requested, approved, …"),
            OpenApiParameter("open", bool, description="true: only those still followed."),
        ],
        responses={200: ReclaimSerializer(many=True), **READ_ERRORS, **error_responses(400)},
        description="Reclaims, the newest first: each idle pod noticed under its pool's "
        "policy, its owner told, and what became of it.",
    ),
    retrieve=extend_schema(
        responses={200: ReclaimSerializer, **READ_ERRORS, **error_responses(404)}
    ),
)
class ReclaimViewSet(
    BaseView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    serializer_class = ReclaimSerializer
    pagination_class = Newest
    capabilities = {"POST": Capability.VIEW}  # each step checks its own (pools.reclaim)

    def get_queryset(self) -> QuerySet[Reclaim]:
        found = Reclaim.objects.select_related("pool", "requested_by", "decided_by")
        params = self.request.query_params
        if pool := params.get("pool"):
            found = found.filter(pool__name=pool)
        if state := params.get("state"):
            if state not in Reclaim.State.values:
                raise ValidationError({"state": f"One of {', '.join(Reclaim.State.values)}."})
            found = found.filter(state=state)
        if (open_only := params.get("open")) is not None:
            if open_only not in ("true", "false"):
                raise ValidationError({"open": "true or false."})
            found = found.filter(finished_at__isnull=open_only == "true")
        return found

    def _answer(self, found: Reclaim) -> Response:
        # By its id alone: the list's filters in the query string must not hide a step done.
        again = Reclaim.objects.select_related("pool", "requested_by", "decided_by")
        return Response(ReclaimSerializer(again.get(pk=found.pk)).data)

    @extend_schema(
        request=ReclaimReasonSerializer,
        responses={200: ReclaimSerializer, **DECIDING},
        description="File the prefilled request of a due reclaim (requesters); a blank "
        "reason keeps the prefilled one. Not due: 409 state_conflict.",
    )
    @action(detail=True, methods=["post"], url_path="request")
    @idempotent
    def file_request(self, request: Request, pk: str | None = None) -> Response:
        found = self.get_object()
        data = validated(ReclaimReasonSerializer, request)
        return self._answer(
            reclaim_requests.reclaim_request(
                found.pk, user=request.user, reason=data["reason"], now=timezone.now()
            )
        )

    @extend_schema(
        request=ReclaimReasonSerializer,
        responses={200: ReclaimSerializer, **DECIDING},
        description="Approve a filed reclaim (approvers, not its filer: 403 self_approval). "
        "The pod is evicted through the eviction API, its disruption budget kept.",
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def approve(self, request: Request, pk: str | None = None) -> Response:
        found = self.get_object()
        data = validated(ReclaimReasonSerializer, request)
        return self._answer(
            reclaim_requests.reclaim_approve(
                found.pk, approver=request.user, reason=data["reason"], now=timezone.now()
            )
        )

    @extend_schema(
        request=ReclaimRejectSerializer,
        responses={200: ReclaimSerializer, **DECIDING},
        description="Keep the pod (approvers), before or after the request is filed; it is "
        "noticed again only once it has worked and idled again.",
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def reject(self, request: Request, pk: str | None = None) -> Response:
        found = self.get_object()
        data = validated(ReclaimRejectSerializer, request)
        return self._answer(
            reclaim_requests.reclaim_reject(
                found.pk, approver=request.user, reason=data["reason"], now=timezone.now()
            )
        )
