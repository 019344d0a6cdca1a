"""The search box over the API: nodes, pods, moves and pools, grouped."""

from __future__ import annotations

from drf_spectacular.utils import (
    extend_schema,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.api.base import READ_ERRORS, BaseView, error_responses
from pools.common.roles import Capability, clusters_where
from pools.search import search


class SearchQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    q = serializers.CharField(
        max_length=200,
        help_text="A node name or label value (or key=value), a pod name (or namespace/name), "
        "a move number (#12), a pool.",
    )
    limit = serializers.IntegerField(min_value=1, max_value=100, default=20)


class NodeHitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    cluster = serializers.CharField()
    name = serializers.CharField()
    pool = serializers.CharField(allow_null=True)
    matched = serializers.ListField(child=serializers.CharField())


class PodHitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    cluster = serializers.CharField()
    name = serializers.CharField()
    namespace = serializers.CharField()
    node = serializers.CharField()
    pool = serializers.CharField(allow_null=True)
    gpus = serializers.IntegerField()


class MoveHitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    cluster = serializers.CharField()
    id = serializers.IntegerField()
    kind = serializers.CharField()
    state = serializers.CharField()
    destination = serializers.CharField()
    reason = serializers.CharField()


class PoolHitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    cluster = serializers.CharField()
    name = serializers.CharField()
    display_name = serializers.CharField()


class SearchSerializer(serializers.Serializer):  # type: ignore[type-arg]
    q = serializers.CharField(source="query.text")
    total = serializers.IntegerField()
    nodes = NodeHitSerializer(many=True)
    pods = PodHitSerializer(many=True)
    moves = MoveHitSerializer(many=True)
    pools = PoolHitSerializer(many=True)
    more = serializers.DictField(
        child=serializers.IntegerField(), help_text="Hits left out past the limit, by group."
    )


class SearchView(BaseView, APIView):
    @extend_schema(
        parameters=[SearchQuerySerializer],
        responses={200: SearchSerializer, **READ_ERRORS, **error_responses(400)},
        description="What the search box finds: nodes, pods (with the node and pool holding "
        "them), moves by number, pools; grouped, `limit` hits a group. Every cluster the "
        "caller may view is searched, the one asked for (`?cluster=`) first; each hit names "
        "its `cluster`.",
    )
    def get(self, request: Request) -> Response:
        query = SearchQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = search(
            text=query.validated_data["q"],
            clusters=clusters_where(request.user, Capability.VIEW),
            limit=query.validated_data["limit"],
        )
        return Response(SearchSerializer(found).data)
