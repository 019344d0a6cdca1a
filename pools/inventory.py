"""The inventory: what GPU nodes the cluster holds, kept as `Node` rows.

One sync lists every pod and every node through pools/kube (paged), computes each GPU
node's pool, GPU allocation and drift with the pure core, and writes the rows in bulk: a
constant number of SQL statements per page of nodes. Nodes that vanish are marked gone,
not deleted, so their history stays readable.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools import observability
from pools.core.desired import PoolSpec, drift_record
from pools.core.snapshot import NodeSnapshot, PodSummary, is_gpu_node, node_snapshot, pod_summary
from pools.kube import nodes as kube_nodes
from pools.kube.nodes import Raw
from pools.models import Node, Pool
from pools.move_records import update_nodes

# A sync rewrites the whole row but its key: every field of the model is the snapshot's.
UPDATED_FIELDS = [
    f.name for f in Node._meta.concrete_fields if not f.primary_key and f.name != "name"
]


@dataclass(frozen=True)
class SyncReport:
    nodes_listed: int
    gpu_nodes: int
    pods: int
    gone: int
    seconds: float

    def __str__(self) -> str:
        return (
            f"{self.gpu_nodes} GPU nodes (of {self.nodes_listed} listed), {self.pods} pods, "
            f"{self.gone} marked gone, in {self.seconds:.1f}s"
        )


def build_node(
    snapshot: NodeSnapshot,
    pods: Iterable[PodSummary],
    pools: Sequence[PoolSpec],
    pool_ids: dict[str, int],
    seen_at: object,
) -> Node:
    pod_list = sorted(pods, key=lambda p: (-p.gpus, p.namespace, p.name))
    label = snapshot.labels.get(settings.POOL_LABEL_KEY, "")
    node_drift = drift_record(
        snapshot.labels,
        snapshot.taints,
        pools,
        known_pools=pool_ids.keys(),
        pool_key=settings.POOL_LABEL_KEY,
    )
    return Node(
        name=snapshot.name,
        pool_id=pool_ids.get(label),
        pool_label=label,
        gpu_model=snapshot.gpu_model,
        gpu_count=snapshot.gpu_count,
        gpu_memory_mib=snapshot.gpu_memory_mib,
        gpu_allocatable=snapshot.gpu_allocatable,
        gpu_allocated=sum(p.gpus for p in pod_list),
        cpu_allocatable=snapshot.cpu_allocatable,
        memory_allocatable=snapshot.memory_allocatable,
        ready=snapshot.ready,
        cordoned=snapshot.cordoned,
        labels=dict(snapshot.labels),
        taints=snapshot.taints,
        drifted=bool(node_drift),
        drift=node_drift,
        pods=[p.as_dict() for p in pod_list],
        resource_version=snapshot.resource_version,
        last_seen=seen_at,
        gone_at=None,
    )


def _upsert(rows: list[Node]) -> None:
    Node.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["name"], update_fields=UPDATED_FIELDS
    )


def _active_pools() -> tuple[list[PoolSpec], dict[str, int]]:
    pools = list(Pool.objects.active())
    return [p.spec() for p in pools], {p.name: p.pk for p in pools}


@observability.inventory_sync_timed
def inventory_sync() -> SyncReport:
    """List the cluster and bring every Node row up to date."""
    started = time.monotonic()
    seen_at = timezone.now()
    specs, pool_ids = _active_pools()
    pods_by_node: dict[str, list[PodSummary]] = collections.defaultdict(list)
    pod_count = 0
    for page in kube_nodes.pod_pages():
        for raw in page:
            summary = pod_summary(raw)
            if summary is not None:
                pods_by_node[summary.node].append(summary)
                pod_count += 1
    listed = gpu_nodes = 0
    for page in kube_nodes.node_pages():
        listed += len(page)
        rows = [
            build_node(
                node_snapshot(raw),
                pods_by_node.get(raw["metadata"]["name"], ()),
                specs,
                pool_ids,
                seen_at,
            )
            for raw in page
            if is_gpu_node(raw)
        ]
        gpu_nodes += len(rows)
        if rows:
            _upsert(rows)
    gone = Node.objects.filter(last_seen__lt=seen_at, gone_at__isnull=True).update(gone_at=seen_at)
    return SyncReport(listed, gpu_nodes, pod_count, gone, time.monotonic() - started)


def inventory_refresh_node(raw: Raw) -> Node | None:
    """Refresh one node's row at once (after a move), from the node the API server returned."""
    if not is_gpu_node(raw):
        return None
    name = raw["metadata"]["name"]
    pods = [
        s
        for page in kube_nodes.pod_pages(node_name=name)
        for r in page
        if (s := pod_summary(r)) is not None
    ]
    specs, pool_ids = _active_pools()
    row = build_node(node_snapshot(raw), pods, specs, pool_ids, timezone.now())
    _upsert([row])
    return Node.objects.get(name=name)


# What a move changes on a node: refreshed at once from the API server's answer.
MOVED_FIELDS = [
    "pool",
    "pool_label",
    "labels",
    "taints",
    "cordoned",
    "drifted",
    "drift",
    "resource_version",
    "last_seen",
]


def inventory_refresh_nodes(raws: Sequence[Raw]) -> int:
    """Refresh the rows of nodes a move just changed, from the nodes the API server returned:
    labels, taints, cordon, pool and drift, in one statement. Their pods are the inventory
    sync's (a move changes no pod). Returns how many rows changed."""
    by_name = {raw["metadata"]["name"]: raw for raw in raws if is_gpu_node(raw)}
    if not by_name:
        return 0
    specs, pool_ids = _active_pools()
    now = timezone.now()
    rows = [build_node(node_snapshot(raw), [], specs, pool_ids, now) for raw in by_name.values()]
    update_nodes(rows, MOVED_FIELDS)
    return len(rows)


@transaction.atomic
def drift_recompute() -> int:
    """Recompute every present node's drift against the current pool definitions (after a
    pool is edited: saving a pool never touches nodes, the nodes show as drifted)."""
    specs, pool_ids = _active_pools()
    pool_key = settings.POOL_LABEL_KEY
    rows = list(Node.objects.present().only("id", "labels", "taints", "pool_label"))
    for row in rows:
        row.drift = drift_record(
            row.labels, row.taints, specs, known_pools=pool_ids.keys(), pool_key=pool_key
        )
        row.drifted = bool(row.drift)
        row.pool_id = pool_ids.get(row.pool_label)
    Node.objects.bulk_update(rows, ["drift", "drifted", "pool"], batch_size=500)
    return sum(1 for row in rows if row.drifted)
