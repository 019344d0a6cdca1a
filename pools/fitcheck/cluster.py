"""The cluster as the fit core sees it, read from the inventory (a selector).

Three queries whatever the size of the cluster: the active pools, the present nodes, the live
GPU pods bound to them. Each node's requests are what the inventory keeps: its numeric
allocatable figures and the sums requested by all its pods (`Node.cpu_requested_milli`, …).
The GPU pods bound to the node come as pods of their own, so their priorities count for
preemption; what the node's other pods request is one more pod with no GPU. Those other pods'
priorities are unknown to the inventory: they are taken as the highest, so the check never
promises a preemption that would need evicting them.

The inventory does not keep a node's pod capacity (allocatable "pods"); the core's default
of 110 stands for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from django.conf import settings

from pools.core.fit.cluster import ClusterSnapshot, FitNode, FitPool, NodePod
from pools.core.fit.quantities import QuantityError, parse_quantity
from pools.core.fit.resources import Resources, amount_in_units
from pools.core.fit.scheduling import Taint
from pools.models import GpuPod, Node, Pool

UNKNOWN_PRIORITY = 2**31 - 1  # pods the inventory keeps no priority for: never preempted

_NODE_FIELDS = (
    "name",
    "pool_label",
    "labels",
    "taints",
    "cordoned",
    "ready",
    "gpu_allocatable",
    "gpu_allocated",
    "cpu_allocatable",
    "memory_allocatable",
    "cpu_allocatable_milli",
    "memory_allocatable_bytes",
    "cpu_requested_milli",
    "memory_requested_bytes",
)
_POD_FIELDS = ("node_name", "namespace", "name", "gpus", "cpu_milli", "memory_bytes", "priority")


@dataclass(frozen=True)
class FitCluster:
    snapshot: ClusterSnapshot
    pools: Mapping[str, Pool]  # the active pools by name
    priority_classes: Mapping[str, int]  # the classes seen on pods, with their values
    pool_key: str


def fit_pool(pool: Pool) -> FitPool:
    taint = pool.taint
    return FitPool(
        pool.name,
        dict(pool.labels),
        Taint(taint.key, taint.value, taint.effect) if taint else None,
        tuple(pool.accepted_gpu_models),
    )


def fit_cluster() -> FitCluster:
    """Every present node with what is free on it, and every active pool."""
    pools = {p.name: p for p in Pool.objects.active()}
    rows = list(Node.objects.present().values_list(*_NODE_FIELDS))
    pods: dict[str, list[tuple[object, ...]]] = defaultdict(list)
    classes: dict[str, int] = {}
    bound = GpuPod.objects.live().exclude(node_name="")
    for pod in bound.values_list(*_POD_FIELDS, "priority_class"):
        pods[str(pod[0])].append(pod)
        if pod[-1] and pod[6] is not None:
            classes[str(pod[-1])] = int(pod[6])  # type: ignore[call-overload]
    nodes = [_fit_node(row, pods.get(row[0], ())) for row in rows]
    snapshot = ClusterSnapshot(nodes, [fit_pool(p) for p in pools.values()])
    return FitCluster(snapshot, pools, classes, settings.POOL_LABEL_KEY)


def _fit_node(row: Sequence[object], gpu_pods: Iterable[Sequence[object]]) -> FitNode:
    (name, pool, labels, taints, cordoned, ready, gpus, allocated, cpu, memory) = row[:10]
    cpu_milli, memory_bytes, cpu_requested, memory_requested = (int(v) for v in row[10:])  # type: ignore[call-overload]
    on_node = [
        NodePod(
            Resources(int(p[4]), int(p[5]), int(p[3])),  # type: ignore[call-overload]
            UNKNOWN_PRIORITY if p[6] is None else int(p[6]),  # type: ignore[call-overload]
            f"{p[1]}/{p[2]}",
        )
        for p in gpu_pods
    ]
    # What the node's pods request beyond its GPU pods (and GPUs held by pods the inventory
    # has not recorded as GpuPod rows yet).
    rest = Resources(
        max(cpu_requested - sum(p.requests.cpu_milli for p in on_node), 0),
        max(memory_requested - sum(p.requests.memory for p in on_node), 0),
        max(int(allocated) - sum(p.requests.gpu for p in on_node), 0),  # type: ignore[call-overload]
    )
    if not rest.is_zero:
        on_node.append(NodePod(rest, UNKNOWN_PRIORITY, "other pods"))
    return FitNode(
        name=str(name),
        pool=str(pool),
        labels=dict(labels),  # type: ignore[call-overload]
        taints=tuple(
            Taint(t.get("key", ""), t.get("value", ""), t.get("effect", ""))
            for t in taints  # type: ignore[attr-defined]
        ),
        unschedulable=bool(cordoned),
        ready=bool(ready),
        allocatable=Resources(
            cpu_milli or _amount("cpu", cpu),
            memory_bytes or _amount("memory", memory),
            int(gpus),  # type: ignore[call-overload]
        ),
        pods=tuple(on_node),
    )


def _amount(resource: str, raw: object) -> int:
    """The allocatable string, for rows written before the numeric figures were kept."""
    try:
        return amount_in_units(resource, parse_quantity(raw or "0"))
    except QuantityError:
        return 0
