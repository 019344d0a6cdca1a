"""The full sync: list every pod and node, write every row (the safety net behind the
watcher, and what the `sync_inventory` command and the tests run).

Pods are listed first, page by page: each page's GPU pods are upserted at once and only a
small summary of every bound pod is kept, for its node's sums. Then the nodes, page by
page, each page one bulk upsert. Nodes that vanished are marked gone, pods that vanished
deleted, not removed, so their history stays readable: a constant number of SQL
statements per page.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.common import observability
from pools.common.cluster_access import pool_label_key
from pools.core.desired import drift_record
from pools.core.fit.resources import Resources
from pools.core.pod_page import gpu_pod_row, is_gpu_pod
from pools.core.pod_record import pod_requests
from pools.core.snapshot import PodSummary, is_gpu_node, node_snapshot, pod_summary
from pools.inventory.dra import dra_sync_logged
from pools.inventory.lease import (
    Contact,
    holder_name,
    lease_acquire,
    lease_contact,
    lease_holder,
    lease_release,
    relist_request,
)
from pools.inventory.rows import (
    active_pools,
    build_node,
    gpu_pods_pool_fill,
    gpu_pods_purge,
    gpu_pods_unseen_deleted,
    gpu_pods_upsert,
    nodes_mark_gone,
    nodes_upsert,
    pod_labels,
)
from pools.inventory.version import inventory_version_bump
from pools.kube import nodes as kube_nodes
from pools.kube.errors import KubeError
from pools.kube.nodes import Raw
from pools.kube.read_ahead import read_ahead
from pools.membership.stays import stays_follow
from pools.models import Node
from pools.moves.execution.writes import update_nodes


@dataclass(frozen=True)
class SyncReport:
    nodes_listed: int
    gpu_nodes: int
    pods: int
    gone: int
    seconds: float
    gpu_pods: int = 0
    pods_deleted: int = 0

    def __str__(self) -> str:
        return (
            f"{self.gpu_nodes} GPU nodes (of {self.nodes_listed} listed), {self.pods} pods, "
            f"{self.gone} marked gone, {self.gpu_pods} GPU pods ({self.pods_deleted} deleted), "
            f"in {self.seconds:.1f}s"
        )


@dataclass
class PodListing:
    by_node: dict[str, list[PodSummary]]
    bound: int = 0  # bound pods that have not finished
    gpu_pods: int = 0


def pods_list_and_write(seen_at: datetime) -> PodListing:
    """Every pod, page by page: GPU pods written, bound ones summarised by node."""
    listing = PodListing(collections.defaultdict(list))
    cache: dict[str, Resources] = {}
    labels = pod_labels()
    for page in read_ahead(kube_nodes.all_pod_pages()):
        gpu_rows = []
        for raw in page:
            requests = pod_requests(raw, cache)
            summary = pod_summary(raw, requests)
            if summary is not None:
                listing.by_node[summary.node].append(summary)
                listing.bound += not summary.finished
            if is_gpu_pod(requests):
                gpu_rows.append(
                    gpu_pod_row(raw, requests, labels=labels, node_pools={}, observed=seen_at)
                )
        gpu_pods_upsert(gpu_rows)
        listing.gpu_pods += len(gpu_rows)
    return listing


@observability.inventory_sync_timed
def inventory_sync() -> SyncReport:
    """List the cluster and bring every Node and GpuPod row up to date."""
    started = time.monotonic()
    seen_at = timezone.now()
    specs, pool_ids = active_pools()
    pods = pods_list_and_write(seen_at)
    listed = gpu_nodes = 0
    for page in kube_nodes.node_pages():
        listed += len(page)
        node_rows = [
            build_node(
                node_snapshot(raw),
                pods.by_node.get(raw["metadata"]["name"], ()),
                specs,
                pool_ids,
                seen_at,
            )
            for raw in page
            if is_gpu_node(raw)
        ]
        gpu_nodes += len(node_rows)
        nodes_upsert(node_rows)
    gone = nodes_mark_gone(Node.objects.filter(last_seen__lt=seen_at), seen_at)
    gpu_pods_pool_fill(written_since=seen_at)
    deleted = gpu_pods_unseen_deleted(seen_at, seen_at)
    gpu_pods_purge(seen_at)
    dra_sync_logged()
    return SyncReport(
        listed,
        gpu_nodes,
        pods.bound,
        gone,
        time.monotonic() - started,
        gpu_pods=pods.gpu_pods,
        pods_deleted=deleted,
    )


def inventory_refresh_node(raw: Raw) -> Node | None:
    """Refresh one node's row at once (after a move), from the node the API server returned."""
    if not is_gpu_node(raw):
        return None
    name = raw["metadata"]["name"]
    cache: dict[str, Resources] = {}
    pods = [
        s
        for page in kube_nodes.pod_pages(node_name=name)
        for r in page
        if (s := pod_summary(r, pod_requests(r, cache))) is not None
    ]
    specs, pool_ids = active_pools()
    nodes_upsert([build_node(node_snapshot(raw), pods, specs, pool_ids, timezone.now())])
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
    labels, taints, cordon, pool and drift, in one statement. Their pods and the figures
    made of them are the watcher's and the sync's (a move changes no pod). Returns how many
    rows were written."""
    by_name = {raw["metadata"]["name"]: raw for raw in raws if is_gpu_node(raw)}
    if not by_name:
        return 0
    specs, pool_ids = active_pools()
    now = timezone.now()
    rows = [build_node(node_snapshot(raw), [], specs, pool_ids, now) for raw in by_name.values()]
    update_nodes(rows, MOVED_FIELDS)
    inventory_version_bump()
    stays_follow(by_name, now)
    return len(rows)


@transaction.atomic
def drift_recompute() -> int:
    """Recompute every present node's drift against the current pool definitions (after a
    pool is edited: saving a pool never touches nodes, the nodes show as drifted)."""
    specs, pool_ids = active_pools()
    pool_key = pool_label_key()
    present = list(Node.objects.present().only("id", "labels", "taints", "pool_label"))
    for row in present:
        row.drift = drift_record(
            row.labels, row.taints, specs, known_pools=pool_ids.keys(), pool_key=pool_key
        )
        row.drifted = bool(row.drift)
        row.pool_id = pool_ids.get(row.pool_label)
    Node.objects.bulk_update(present, ["drift", "drifted", "pool"], batch_size=500)
    inventory_version_bump()
    return sum(1 for row in present if row.drifted)


def inventory_safety_net() -> str:
    """The beat's periodic full sync. With a watcher holding the lease, it asks the watcher
    to list everything again (one writer); otherwise it syncs here, under the lease."""
    if (watcher := relist_request()) is not None:
        return f"asked the inventory watcher {watcher} to list again"
    holder = holder_name("sync")
    # A sync longer than its interval is a problem of its own; the lease outlives it then.
    if not lease_acquire(holder, settings.INVENTORY_SYNC_SECONDS):
        return f"skipped: {lease_holder()} holds the inventory lease"
    try:
        try:
            report = inventory_sync()
        except KubeError as exc:
            lease_contact(holder, Contact(None, str(exc)))
            raise
        lease_contact(holder, Contact(0.0))
        return str(report)
    finally:
        lease_release(holder)
