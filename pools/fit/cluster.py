"""The cluster as the fit core sees it, read from the inventory (a selector).

Three queries whatever the size of the cluster: the active pools, the present nodes, and what
the live GPU pods bound to them request, summed in SQL per node and priority (with the
priority classes seen on them); one more where some node's pods hold MIG instances or shared
GPUs, for what the GPU pods among them hold. Each node's requests are what the inventory
keeps: its numeric allocatable figures and the sums requested by all its pods
(`Node.cpu_requested_milli`, …).
The GPU pods of one priority on a node come as one pod: the scheduler's preemption evicts
every lower-priority pod before it asks whether the pod fits, so the sum is what counts.
What the node's other pods request is one more pod with no GPU; their priorities are unknown
to the inventory, so they are taken as the highest and the check never promises a preemption
that would need evicting them.

A node's pod slots are its allocatable "pods" as the inventory keeps it; for a row that
predates that figure (0), the kubelet's default of 110 stands for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import F, Sum

from pools.common.cluster_access import pool_label_key
from pools.core.devices import units_held
from pools.core.fit.claims import NO_DRA
from pools.core.fit.cluster import ClusterSnapshot, FitNode, FitPool, NodePod
from pools.core.fit.resources import ZERO, Resources, amount_or_zero
from pools.core.taints import Taint
from pools.inventory.dra import dra_kept
from pools.models import GpuPod, Node, Pool

OTHER_PODS = "other pods"  # the NodePod standing for a node's pods that are not GPU pods
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
    "pods_allocatable",
    "resources",
    "resources_requested",
)
_REQUESTED = _NODE_FIELDS.index("resources_requested")
KUBELET_DEFAULT_MAX_PODS = 110


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


def fit_cluster(*, dra: bool = False) -> FitCluster:
    """Every present node with what is free on it, and every active pool; with `dra`, the
    devices, classes and claims of DRA too (one query more, for a pod that makes claims)."""
    pools = {p.name: p for p in Pool.objects.active()}
    rows = list(Node.objects.present().values_list(*_NODE_FIELDS))
    bound = GpuPod.objects.live().exclude(node_name="")
    sums: dict[tuple[str, int | None], Resources] = {}
    classes: dict[str, int] = {}
    for node, priority, name, gpus, cpu, memory in (
        bound.values_list("node_name", "priority", "priority_class")
        .annotate(Sum("gpus"), Sum("cpu_milli"), Sum("memory_bytes"))
        .order_by()
    ):
        key = (node, priority)
        sums[key] = sums.get(key, ZERO).plus(Resources(cpu or 0, memory or 0, gpus or 0))
        if name and priority is not None:
            classes[name] = priority
    if any(units_held(0, row[_REQUESTED]) for row in rows):
        # Some node's pods hold MIG instances or shared GPUs: those of its GPU pods, by
        # priority, so a preemption frees them too (one query more, read only then).
        for node, priority, requests in bound.filter(units__gt=F("gpus")).values_list(
            "node_name", "priority", "unit_requests"
        ):
            key = (node, priority)
            sums[key] = sums.get(key, ZERO).plus(Resources.of(requests or {}))
    held: dict[str, list[NodePod]] = defaultdict(list)
    totals: dict[str, Resources] = {}
    for (node, priority), requests in sums.items():
        pod = NodePod(
            requests,
            UNKNOWN_PRIORITY if priority is None else priority,
            f"GPU pods of priority {priority}",
        )
        held[node].append(pod)
        totals[node] = totals.get(node, ZERO).plus(requests)
    nodes = [_fit_node(row, held.get(row[0], []), totals.get(row[0], ZERO)) for row in rows]
    state = dra_kept() if dra else NO_DRA
    snapshot = ClusterSnapshot(nodes, [fit_pool(p) for p in pools.values()], state)
    return FitCluster(snapshot, pools, classes, pool_label_key())


def gpu_node_pod(pod: GpuPod) -> NodePod:
    """One GPU pod as a pod on its node."""
    priority = UNKNOWN_PRIORITY if pod.priority is None else pod.priority
    requests = Resources.of(pod.unit_requests or {})
    return NodePod(
        Resources(pod.cpu_milli, pod.memory_bytes, pod.gpus, requests.extended),
        priority,
        str(pod),
    )


def _fit_node(row: Sequence[Any], on_node: list[NodePod], gpu_pods: Resources) -> FitNode:
    (name, pool, labels, taints, cordoned, ready, gpus, allocated, cpu, memory) = row[:10]
    cpu_milli, memory_bytes, cpu_requested, memory_requested, pod_slots = row[10:15]
    resources, resources_requested = row[15:]
    # What the node's pods request beyond its GPU pods (and units held by pods the inventory
    # has not recorded as GpuPod rows yet); GpuPod rows keep their GPU units only, so the
    # node's requests of every other extended resource are here.
    held = dict(gpu_pods.extended)
    rest = Resources(
        max(cpu_requested - gpu_pods.cpu_milli, 0),
        max(memory_requested - gpu_pods.memory, 0),
        max(allocated - gpu_pods.gpu, 0),
        tuple(
            sorted(
                (n, a - held.get(n, 0))
                for n, a in resources_requested.items()
                if a > held.get(n, 0)
            )
        ),
    )
    if not rest.is_zero:
        on_node = [*on_node, NodePod(rest, UNKNOWN_PRIORITY, OTHER_PODS)]
    return FitNode(
        name=name,
        pool=pool,
        labels=labels,
        taints=tuple(
            Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in taints
        ),
        unschedulable=cordoned,
        ready=ready,
        allocatable=Resources(
            cpu_milli or amount_or_zero("cpu", cpu),
            memory_bytes or amount_or_zero("memory", memory),
            gpus,
            tuple(sorted(resources.items())),
        ),
        max_pods=pod_slots or KUBELET_DEFAULT_MAX_PODS,
        pods=tuple(on_node),
    )
