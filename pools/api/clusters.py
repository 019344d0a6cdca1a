"""GET /api/v1/clusters/: the clusters this portal serves (one in this version), each with how
fresh its inventory is: when its writer last had an answer from the API server, and why the
nodes shown may be stale."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers as S
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.api.base import READ_ERRORS, BaseView
from pools.inventory.freshness import Freshness, inventory_freshness


class InventorySerializer(S.Serializer):  # type: ignore[type-arg]
    stale = S.BooleanField(help_text="The nodes shown may be out of date (`why` says why).")
    why = S.CharField(help_text="Why they may be stale; empty otherwise.")
    heard_seconds_ago = S.FloatField(
        allow_null=True,
        help_text="Since the watcher or sync last had an answer from the API server.",
    )
    written_seconds_ago = S.FloatField(help_text="Since the watcher or sync last wrote.")
    trouble = S.CharField(help_text="What goes wrong with the API server since, if anything.")


class MetricsScopeSerializer(S.Serializer):  # type: ignore[type-arg]
    configured = S.BooleanField()
    cluster_label = S.CharField(help_text="On a shared querier, the label selecting the cluster.")
    cluster_value = S.CharField()


class ClusterSerializer(S.Serializer):  # type: ignore[type-arg]
    name = S.CharField()
    colour = S.CharField()
    inventory = InventorySerializer(
        allow_null=True, help_text="null until a watcher or the periodic sync first ran."
    )
    metrics = MetricsScopeSerializer()


def _inventory(found: Freshness | None) -> dict[str, object] | None:
    if found is None:
        return None
    return {
        "stale": found.stale,
        "why": found.why,
        "heard_seconds_ago": round(found.heard_ago, 1) if found.heard_ago is not None else None,
        "written_seconds_ago": round(found.written_ago, 1),
        "trouble": found.trouble,
    }


class ClustersView(BaseView, APIView):
    @extend_schema(
        responses={200: ClusterSerializer(many=True), **READ_ERRORS},
        description="The clusters this portal serves (one in this version), and whether "
        "each one's inventory is stale.",
    )
    def get(self, request: Request) -> Response:
        cluster = {
            "name": settings.CLUSTER_NAME,
            "colour": settings.CLUSTER_COLOUR,
            "inventory": _inventory(inventory_freshness()),
            "metrics": {
                "configured": bool(settings.PROMETHEUS_URL),
                "cluster_label": settings.PROMETHEUS_CLUSTER_LABEL,
                "cluster_value": settings.PROMETHEUS_CLUSTER_VALUE,
            },
        }
        return Response(ClusterSerializer([cluster], many=True).data)
