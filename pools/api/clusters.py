"""GET /api/v1/clusters/: the clusters this portal serves, its own first, each with how fresh
its inventory is: when its writer last had an answer from the API server, and why the nodes
shown may be stale."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers as S
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.api.base import READ_ERRORS, BaseView
from pools.common.cluster_access import cluster_access, served_clusters
from pools.core.cluster_scope import any_cluster, cluster_scope
from pools.fleet.across import fleet_summary
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


def _cluster(name: str) -> dict[str, object]:
    """One cluster's entry, read in its own scope (its lease, its Prometheus)."""
    with cluster_scope(name):
        access = cluster_access()
        return {
            "name": name,
            "colour": access.colour,
            "inventory": _inventory(inventory_freshness()),
            "metrics": {
                "configured": bool(access.prometheus.url),
                "cluster_label": access.prometheus.cluster_label,
                "cluster_value": access.prometheus.cluster_value,
            },
        }


@any_cluster
class ClustersView(BaseView, APIView):
    @extend_schema(
        responses={200: ClusterSerializer(many=True), **READ_ERRORS},
        description="The clusters this portal serves, its own first, and whether each one's "
        "inventory is stale.",
    )
    def get(self, request: Request) -> Response:
        clusters = [_cluster(name) for name in served_clusters()]
        return Response(ClusterSerializer(clusters, many=True).data)


class TallySerializer(S.Serializer):  # type: ignore[type-arg]
    nodes = S.IntegerField()
    gpus = S.IntegerField(help_text="Physical GPUs.")
    allocated = S.IntegerField(help_text="Units pods hold: whole GPUs, MIG instances, replicas.")


class FleetPoolSerializer(S.Serializer):  # type: ignore[type-arg]
    name = S.CharField(help_text="Empty for the cluster's unassigned nodes.")
    display_name = S.CharField()
    tally = TallySerializer()


class FleetClusterSerializer(S.Serializer):  # type: ignore[type-arg]
    name = S.CharField()
    colour = S.CharField()
    stale = S.CharField(help_text="Why its inventory may be stale; empty otherwise.")
    pools = FleetPoolSerializer(many=True)
    tally = TallySerializer()


class FleetModelSerializer(S.Serializer):  # type: ignore[type-arg]
    gpu_model = S.CharField()
    tally = TallySerializer()
    gpus_by_cluster = S.DictField(child=S.IntegerField())


class FleetSerializer(S.Serializer):  # type: ignore[type-arg]
    clusters = FleetClusterSerializer(many=True)
    models = FleetModelSerializer(many=True)
    total = TallySerializer()


@any_cluster
class FleetView(BaseView, APIView):
    @extend_schema(
        responses={200: FleetSerializer, **READ_ERRORS},
        description="Every cluster served with its pools, and GPU totals by model across "
        "them (the fleet page).",
    )
    def get(self, request: Request) -> Response:
        return Response(FleetSerializer(fleet_summary()).data)
