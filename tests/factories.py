"""Rows for model-level tests, without a cluster: GPU nodes as the inventory stores them.

The rows are built from raw API objects through the inventory's own parsing
(pools.core.snapshot) and pools.inventory.build_node, so pools, drift and GPU allocation are
computed as a sync computes them. `demo_inventory()` stores the nodes of kubesim's demo
scenario (kubesim/scenarios/demo.yaml) under the same names;
tests/edges/inventory/test_inventory.py checks a real sync of that scenario against a running
kubesim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from pools.core.snapshot import node_snapshot, pod_summary
from pools.inventory import build_node
from pools.inventory.rows import nodes_upsert
from pools.models import Node, Pool

A100 = ("NVIDIA-A100-SXM4-80GB", 8, 81920)
H100 = ("NVIDIA-H100-80GB-HBM3", 8, 81559)
L40S = ("NVIDIA-L40S", 4, 46068)


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    gpus: int
    owner: str = "ReplicaSet"
    copies: int = 1  # copies get -0, -1, … after the node's name


@dataclass(frozen=True)
class Group:
    """Nodes named <prefix>-000, -001, …, alike."""

    prefix: str
    count: int
    pool: str | None
    gpu: tuple[str, int, int] = A100
    pods: tuple[Pod, ...] = ()
    tainted: bool = True  # carries its pool's taint (False: drifted)
    ready: bool = True
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    landed: tuple[Pod, ...] = ()  # pods that were pending and were scheduled here: <name>-<copy>


DEMO = (
    Group("a100-train", 4, "training", pods=(Pod("llm-pretrain", "ml-training", 8, "Job"),)),
    Group(
        "a100-train-drift",
        1,
        "training",
        pods=(Pod("finetune", "ml-training", 4, "Job"),),
        tainted=False,
        # Two of the pending eval jobs tolerate no taint: the untainted node took them.
        landed=(Pod("eval-job", "ml-training", 2, "Job", copies=2),),
    ),
    Group(
        "a100-infer",
        5,
        "inference",
        pods=(Pod("chat-serving", "ml-serving", 2, copies=2), Pod("embedder", "ml-serving", 1)),
    ),
    Group("a100-reserve", 9, "mixed", pods=(Pod("notebook", "research", 1),)),
    Group("a100-reserve-down", 1, "mixed", ready=False),
    Group("h100-infer", 3, "inference", gpu=H100, pods=(Pod("llm-serving", "ml-serving", 4),)),
    Group("gpu-new", 2, None, gpu=L40S),
)


def raw_node(
    name: str,
    *,
    labels: Mapping[str, str],
    taints: Iterable[Mapping[str, str]] = (),
    gpu: tuple[str, int, int] = A100,
    ready: bool = True,
) -> dict[str, Any]:
    """A Node object as the API server returns it, with what the inventory reads."""
    model, count, memory = gpu
    if not ready:
        # A node whose kubelet stopped posting status (Ready=Unknown): the node lifecycle
        # controller taints it unreachable, NoSchedule at once and NoExecute after a while.
        taints = [
            *taints,
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        ]
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": {
                "kubernetes.io/hostname": name,
                **labels,
                "nvidia.com/gpu.product": model,
                "nvidia.com/gpu.memory": str(memory),
                "nvidia.com/gpu.present": "true",
            },
        },
        "spec": {"taints": list(taints)},
        "status": {
            "capacity": {"nvidia.com/gpu": str(count), "cpu": "96", "memory": "1Ti"},
            "allocatable": {"nvidia.com/gpu": str(count), "cpu": "95", "memory": "1000Gi"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}],
        },
    }


def raw_pod(name: str, namespace: str, node: str, gpus: int, owner: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [{"kind": owner, "name": name, "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {"phase": "Running"},
    }


def pool_labels(pool_name: str | None, *, tainted: bool = True) -> tuple[dict[str, str], list]:  # type: ignore[type-arg]
    """The labels and taints a node of `pool_name` carries (none for no pool)."""
    if pool_name is None:
        return {}, []
    pool = Pool.objects.get(name=pool_name)
    labels = {**pool.labels, settings.POOL_LABEL_KEY: pool.name}
    taints = [pool.taint.to_api()] if pool.taint is not None and tainted else []
    return labels, taints


def store(nodes: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]]) -> list[Node]:
    """Store (raw node, its raw pods) pairs as the inventory would, in one bulk insert."""
    pools = list(Pool.objects.active())
    specs, pool_ids = [p.spec() for p in pools], {p.name: p.pk for p in pools}
    now = timezone.now()
    rows = [
        build_node(
            node_snapshot(raw),
            [s for p in pods if (s := pod_summary(p)) is not None],
            specs,
            pool_ids,
            now,
        )
        for raw, pods in nodes
    ]
    nodes_upsert(rows)  # the inventory's own write: the version bumped, the stays opened
    return list(Node.objects.filter(name__in=[r.name for r in rows]).select_related("pool"))


def node_and_pods(name: str, group: Group) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    labels, taints = pool_labels(group.pool, tainted=group.tainted)
    pods = [
        raw_pod(
            f"{pod.name}-{name}" + (f"-{copy}" if pod.copies > 1 else ""),
            pod.namespace,
            name,
            pod.gpus,
            pod.owner,
        )
        for pod in (group.pods if group.ready else ())
        for copy in range(pod.copies)
    ] + [
        raw_pod(f"{pod.name}-{copy}", pod.namespace, name, pod.gpus, pod.owner)
        for pod in group.landed
        for copy in range(pod.copies)
    ]
    node = raw_node(
        name,
        labels={**labels, **group.extra_labels},
        taints=taints,
        gpu=group.gpu,
        ready=group.ready,
    )
    return node, pods


def demo_inventory() -> dict[str, Node]:
    """The demo scenario's 25 GPU nodes, stored; by name."""
    rows = store(
        node_and_pods(f"{group.prefix}-{index:03d}", group)
        for group in DEMO
        for index in range(group.count)
    )
    return {row.name: row for row in rows}


def gpu_node(name: str, pool: str | None, **options: Any) -> Node:
    """One GPU node named `name` in `pool` (None: unassigned); options as for Group."""
    (row,) = store([node_and_pods(name, Group(name, 1, pool, **options))])
    return row


def reclaim_row(pool: str, *, namespace: str, pod: str, uid: str, node: str, **fields: Any):  # type: ignore[no-untyped-def]
    """A reclaim as the sweep makes it for a noticed candidate (pools.reclaim.sweep), its
    pool's policy on, for tests of what people and the worker do with it next."""
    from datetime import timedelta

    from pools.models import Reclaim, ReclaimPolicy

    now = timezone.now()
    found = Pool.objects.get(name=pool)
    ReclaimPolicy.objects.update_or_create(pool=found, defaults={"enabled": True})
    values: dict[str, Any] = {
        "pool": found,
        "namespace": namespace,
        "pod": pod,
        "pod_uid": uid,
        "node_name": node,
        "units": 1,
        "team": "search",
        "contact": "search-oncall@example.com",
        "idle_hours": 6.0,
        "gpu_hours": 6.0,
        "noticed_at": now - timedelta(hours=2),
        "grace_until": now - timedelta(hours=1),
        "last_seen_idle_at": now,
        "reason": f"{namespace}/{pod} held 1 GPU unit idle",
        "state": Reclaim.State.DUE,
    }
    values.update(fields)
    return Reclaim.objects.create(**values)


def running_gpu_pod(pool: str, *, uid: str, namespace: str, name: str, node: str, **fields: Any):  # type: ignore[no-untyped-def]
    """A running pod holding one GPU unit as the inventory records it (pools.models.GpuPod),
    for tests that need its row without a cluster."""
    from pools.models import GpuPod

    values: dict[str, Any] = {
        "uid": uid,
        "namespace": namespace,
        "name": name,
        "node_name": node,
        "pool_label": pool,
        "phase": GpuPod.Phase.RUNNING,
        "units": 1,
        "created_at": timezone.now(),
    }
    values.update(fields)
    return GpuPod.objects.create(**values)
