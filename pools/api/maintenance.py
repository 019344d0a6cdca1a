"""A pool's maintenance headroom: how many of its nodes can be drained together now."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.api.base import READ_ERRORS, BaseView, error_responses
from pools.core.headroom import BUDGET, DOWN, FLOOR, GANG, SHARED_BUDGETS
from pools.maintenance.headroom import pool_headroom
from pools.models import Pool

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
