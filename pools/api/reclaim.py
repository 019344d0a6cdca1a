"""Reclaiming idle GPUs over the API: a pool's policy and its candidates, and the held-idle
GPU-hours of each team."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers as S
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools import reclaim
from pools.api.base import READ_ERRORS, WRITE_ERRORS, BaseView, error_responses, validated
from pools.api.fields import StrictIntegerField
from pools.common.roles import Capability
from pools.models import Pool, ReclaimPolicy


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
        "cannot answer. Nothing is evicted.",
    )
    def get(self, request: Request, name: str) -> Response:
        pool = get_object_or_404(Pool.objects.active(), name=name)
        found = reclaim.pool_reclaim_candidates(pool)
        return Response(
            {
                "pool": pool.name,
                "policy": PolicySerializer(found.policy).data,
                "candidates": [c.as_dict() for c in found.candidates],
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
