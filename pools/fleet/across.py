"""The fleet: every cluster served, each with its pools, and GPU totals by model across them.

Read with two SQL queries whatever the number of clusters and nodes (the nodes grouped by
cluster, pool and GPU model; the active pools, so an empty one is listed too), and one more
per cluster for the freshness of its inventory. No PromQL: the live figures are each
cluster's own pages'.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Sum

from pools.common.cluster_access import cluster_access, served_clusters
from pools.core.cluster_scope import cluster_scope
from pools.inventory.freshness import inventory_freshness
from pools.models import Node, Pool


@dataclass
class Tally:
    nodes: int = 0
    gpus: int = 0  # physical GPUs
    allocated: int = 0  # units held by pods (whole GPUs, MIG instances, shared replicas)

    def add(self, nodes: int, gpus: int, allocated: int) -> None:
        self.nodes += nodes
        self.gpus += gpus
        self.allocated += allocated


@dataclass
class FleetPool:
    name: str  # "" for the cluster's unassigned nodes
    display_name: str
    tally: Tally = field(default_factory=Tally)


@dataclass
class FleetCluster:
    name: str
    colour: str
    stale: str  # why its inventory may be stale; "" when fresh or never written
    pools: list[FleetPool] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)


@dataclass
class FleetModel:
    gpu_model: str
    tally: Tally = field(default_factory=Tally)
    gpus_by_cluster: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Fleet:
    clusters: list[FleetCluster]
    models: list[FleetModel]
    total: Tally


def _cluster(name: str) -> FleetCluster:
    with cluster_scope(name):
        fresh = inventory_freshness()
        return FleetCluster(name, cluster_access().colour, fresh.why if fresh else "")


def fleet_summary() -> Fleet:
    names = served_clusters()
    clusters = {name: _cluster(name) for name in names}
    pools: dict[tuple[str, str], FleetPool] = {}
    for cluster, pool, display in (
        Pool.everywhere.active()
        .filter(cluster__in=names)
        .order_by("cluster", "name")
        .values_list("cluster", "name", "display_name")
    ):
        pools[cluster, pool] = FleetPool(pool, display)
    rows = (
        Node.everywhere.present()
        .filter(cluster__in=names)
        .values_list("cluster", "pool__name", "gpu_model")
        .annotate(nodes=Count("id"), gpus=Sum("gpu_count"), allocated=Sum("gpu_allocated"))
        .order_by()
    )
    models: dict[str, FleetModel] = {}
    by_model: dict[str, dict[str, int]] = defaultdict(dict)
    total = Tally()
    for cluster, pool, model, nodes, gpus, allocated in rows:
        key = (cluster, pool or "")
        if key not in pools:
            pools[key] = FleetPool(pool or "", pool or "Unassigned")
        pools[key].tally.add(nodes, gpus or 0, allocated or 0)
        clusters[cluster].tally.add(nodes, gpus or 0, allocated or 0)
        name = model or "unknown model"
        models.setdefault(name, FleetModel(name)).tally.add(nodes, gpus or 0, allocated or 0)
        by_model[name][cluster] = by_model[name].get(cluster, 0) + (gpus or 0)
        total.add(nodes, gpus or 0, allocated or 0)
    for (cluster, _), pool in sorted(pools.items(), key=lambda item: (item[0][1] == "", item[0])):
        clusters[cluster].pools.append(pool)
    for name, model in models.items():
        model.gpus_by_cluster = {c: by_model[name].get(c, 0) for c in names}
    ordered = sorted(models.values(), key=lambda m: (-m.tally.gpus, m.gpu_model))
    return Fleet([clusters[name] for name in names], ordered, total)
