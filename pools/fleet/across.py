"""The fleet: every cluster served, each with its pools, and GPU totals by model and by kind
of unit (whole GPUs, MIG instances, shared replicas, DRA devices) across them.

Read with three SQL queries whatever the number of clusters and nodes, and one more per
cluster for the freshness of its inventory:

- the nodes of whole GPUs only, grouped by cluster, pool and GPU model: their GPU columns
  say everything, and most nodes of a fleet are such;
- the other nodes grouped by their shape (device record, DRA devices, requests): a MIG
  instance or a shared replica is never a GPU, so their units are counted by kind
  (pools.core.devices), once a shape;
- the active pools, so that an empty one is listed too.

No PromQL: the live figures are each cluster's own pages'.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q, Sum

from pools.common.cluster_access import cluster_access, served_clusters
from pools.core.cluster_scope import cluster_scope
from pools.core.devices import DEVICE_COLUMNS, GPU_RESOURCE, WHOLE, UnitKind, devices_of_row
from pools.inventory.freshness import inventory_freshness
from pools.models import Node, Pool

WHOLE_GPU = UnitKind(WHOLE, "nvidia.com/gpu").label


@dataclass
class KindTally:
    kind: str  # the kind's label: "whole GPU", "MIG 1g.10gb", "shared GPU (mps, 4 per GPU)"
    units: int = 0
    allocated: int = 0  # held by pods or by DRA claims


@dataclass
class Tally:
    nodes: int = 0
    gpus: int = 0  # physical GPUs, whatever they are split or shared into
    kinds: dict[str, KindTally] = field(default_factory=dict)

    def add(self, nodes: int, gpus: int, units: list[tuple[str, int, int]]) -> None:
        self.nodes += nodes
        self.gpus += gpus
        for kind, count, allocated in units:
            tally = self.kinds.setdefault(kind, KindTally(kind))
            tally.units += count
            tally.allocated += allocated

    @property
    def units(self) -> list[KindTally]:
        """Its units by kind, whole GPUs first."""
        return sorted(self.kinds.values(), key=lambda k: (k.kind != WHOLE_GPU, k.kind))


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
class FleetKind:
    kind: str
    units: int = 0
    allocated: int = 0
    units_by_cluster: dict[str, int] = field(default_factory=dict)


@dataclass
class FleetModel:
    gpu_model: str
    tally: Tally = field(default_factory=Tally)
    gpus_by_cluster: dict[str, int] = field(default_factory=dict)
    kinds: list[FleetKind] = field(default_factory=list)


@dataclass(frozen=True)
class Fleet:
    clusters: list[FleetCluster]
    models: list[FleetModel]
    total: Tally


# One group of nodes: cluster, pool name ("" unassigned), physical model, nodes, physical
# GPUs, and units by kind (label, units, allocated).
Group = tuple[str, str, str, int, int, list[tuple[str, int, int]]]
ByKind = dict[str, dict[str, int]]  # a kind's label -> cluster -> units


def _cluster(name: str) -> FleetCluster:
    with cluster_scope(name):
        fresh = inventory_freshness()
        return FleetCluster(name, cluster_access().colour, fresh.why if fresh else "")


def _node_groups(names: list[str]) -> Iterator[Group]:
    present = Node.everywhere.present().filter(cluster__in=names)
    plain = Q(devices={}) & Q(dra_units=[])
    for cluster, pool, model, nodes, gpus, units, allocated in (
        present.filter(plain)
        .values_list("cluster", "pool__name", "gpu_model")
        .annotate(
            nodes=Count("id"),
            gpus=Sum("gpu_count"),
            units=Sum("gpu_allocatable"),
            allocated=Sum("gpu_allocated"),
        )
        .order_by()
    ):
        whole = [(WHOLE_GPU, units or 0, allocated or 0)] if units else []
        yield cluster, pool or "", model, nodes, gpus or 0, whole
    # The others grouped by everything their units are read from but what their pods hold of
    # nvidia.com/gpu (summed): nodes of one shape, with the same requests, are read once.
    for row in (
        present.exclude(plain)
        .values("cluster", "pool__name", *_SHAPE)
        .annotate(nodes=Count("id"), held=Sum("gpu_allocated"))
        .order_by()
    ):
        yield _group_of_shape(row)


# What a node's units are read from (pools.core.devices.DEVICE_COLUMNS), but gpu_allocated.
_SHAPE = tuple(column for column in DEVICE_COLUMNS if column != "gpu_allocated")


def _group_of_shape(row: dict[str, Any]) -> Group:
    """The nodes of one shape: their units by kind, each node's counted `nodes` times, and
    the nvidia.com/gpu units their pods hold summed by the database."""
    devices = devices_of_row({**row, "gpu_allocated": 0})
    nodes = row["nodes"]
    units = [
        (
            u.kind.label,
            u.allocatable * nodes,
            (row["held"] or 0) if u.kind.resource == GPU_RESOURCE else u.allocated * nodes,
        )
        for u in devices.units
    ]
    model = devices.model or row["gpu_model"]
    return row["cluster"], row["pool__name"] or "", model, nodes, devices.gpus * nodes, units


def _pools(names: list[str]) -> dict[tuple[str, str], FleetPool]:
    return {
        (cluster, pool): FleetPool(pool, display)
        for cluster, pool, display in Pool.everywhere.active()
        .filter(cluster__in=names)
        .order_by("cluster", "name")
        .values_list("cluster", "name", "display_name")
    }


def _by_cluster(model: FleetModel, gpus: dict[str, int], units: ByKind, names: list[str]) -> None:
    """The model's GPUs and its units of each kind in every cluster, 0 where it has none."""
    model.gpus_by_cluster = {c: gpus.get(c, 0) for c in names}
    model.kinds = [
        FleetKind(k.kind, k.units, k.allocated, {c: units[k.kind].get(c, 0) for c in names})
        for k in model.tally.units
    ]


def fleet_summary() -> Fleet:
    names = served_clusters()
    clusters = {name: _cluster(name) for name in names}
    pools = _pools(names)
    models: dict[str, FleetModel] = {}
    gpus_by: dict[str, dict[str, int]] = defaultdict(dict)
    units_by: dict[str, ByKind] = defaultdict(lambda: defaultdict(dict))
    total = Tally()
    for cluster, pool, model, nodes, gpus, units in _node_groups(names):
        if (cluster, pool) not in pools:
            pools[cluster, pool] = FleetPool(pool, pool or "Unassigned")
        for tally in (pools[cluster, pool].tally, clusters[cluster].tally, total):
            tally.add(nodes, gpus, units)
        name = model or "unknown model"
        models.setdefault(name, FleetModel(name)).tally.add(nodes, gpus, units)
        gpus_by[name][cluster] = gpus_by[name].get(cluster, 0) + gpus
        for kind, count, _ in units:
            units_by[name][kind][cluster] = units_by[name][kind].get(cluster, 0) + count
    for (cluster, _), pool in sorted(pools.items(), key=lambda item: (item[0][1] == "", item[0])):
        clusters[cluster].pools.append(pool)
    for name, model in models.items():
        _by_cluster(model, gpus_by[name], units_by[name], names)
    ordered = sorted(models.values(), key=lambda m: (-m.tally.gpus, m.gpu_model))
    return Fleet([clusters[name] for name in names], ordered, total)
