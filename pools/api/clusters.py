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


class KindTallySerializer(S.Serializer):  # type: ignore[type-arg]
    kind = S.CharField(
        help_text='The kind\'s label: "whole GPU", "MIG 1g.10gb", "shared GPU '
        '(time-slicing, 4 per GPU)", "DRA GPU (gpu.nvidia.com)".'
    )
    units = S.IntegerField(help_text="Units of this kind the nodes offer.")
    allocated = S.IntegerField(help_text="Units of this kind pods (or DRA claims) hold.")


class TallySerializer(S.Serializer):  # type: ignore[type-arg]
    nodes = S.IntegerField()
    gpus = S.IntegerField(help_text="Physical GPUs, whatever they are split or shared into.")
    units = KindTallySerializer(
        many=True,
        help_text="Units by kind, whole GPUs first: a MIG instance or a shared replica is "
        "never counted as a GPU.",
    )


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


class FleetKindSerializer(KindTallySerializer):
    units_by_cluster = S.DictField(child=S.IntegerField())


class FleetModelSerializer(S.Serializer):  # type: ignore[type-arg]
    gpu_model = S.CharField(help_text="The physical GPU's model (a MIG or shared suffix cut).")
    tally = TallySerializer()
    gpus_by_cluster = S.DictField(child=S.IntegerField())
    kinds = FleetKindSerializer(many=True, help_text="The model's units by kind.")


class FleetSerializer(S.Serializer):  # type: ignore[type-arg]
    clusters = FleetClusterSerializer(many=True)
    models = FleetModelSerializer(many=True)
    total = TallySerializer()


@any_cluster
class FleetView(BaseView, APIView):
    @extend_schema(
        responses={200: FleetSerializer, **READ_ERRORS},
        description="Every cluster served with its pools, and GPU totals by model and by "
        "kind of unit across them (the fleet page).",
    )
    def get(self, request: Request) -> Response:
        return Response(FleetSerializer(fleet_summary()).data)
