"""The GPU pods waiting now and why; the pods on a pool's nodes that do not belong there.

Both are reads over the inventory (`GpuPod` rows) and the fit core: a Pending pod's reason is
the scheduler's own FailedScheduling message when the inventory has one, otherwise what the
fit check says the scheduler would answer (one pass over the cluster per distinct pod shape).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from pools.core.fit.check import evaluate_pod
from pools.core.fit.pods import PodShape
from pools.core.fit.scheduling import Toleration, untolerated_taint
from pools.core.fit.verdicts import PodVerdict
from pools.core.fit.workloads import pod_shape
from pools.core.insights.scheduling import wanted_pool
from pools.core.taints import Taint
from pools.fit.cluster import FitCluster, fit_cluster
from pools.fit.service import pod_manifest
from pools.models import GpuPod, Node, Pool

SCHEDULER = "scheduler"  # the reason is the scheduler's FailedScheduling message
FIT_CHECK = "fit check"  # the reason is the fit check's


@dataclass(frozen=True)
class PendingPod:
    pod: GpuPod
    waited: timedelta
    reason: str
    reason_from: str  # SCHEDULER or FIT_CHECK
    fits_now: bool  # the fit check finds a node with room now (the scheduler has not bound it)
    lands_in: tuple[str, ...]  # pools with a node that would take it now
    pool: str = ""  # the one pool it asks for by selector or affinity ("": none, or several)


@dataclass(frozen=True)
class PendingGroup:
    """The pods waiting for the same pool for the same reason (a Job's 30 pods say one
    message 30 times): the page shows it once, with how many, and the pods under it."""

    pool: str
    reason: str
    reason_from: str
    pods: tuple[PendingPod, ...]  # longest wait first

    @property
    def count(self) -> int:
        return len(self.pods)

    @property
    def units(self) -> int:
        """The GPU units its pods ask for: whole GPUs, MIG instances, shares."""
        return sum(p.pod.units for p in self.pods)

    @property
    def longest(self) -> timedelta:
        return self.pods[0].waited

    @property
    def shortest(self) -> timedelta:
        return self.pods[-1].waited

    @property
    def oldest(self) -> datetime:
        return self.pods[0].pod.created_at

    @property
    def newest(self) -> datetime:
        return self.pods[-1].pod.created_at


# How the groups can be ordered: the longest wait first (the default), the most pods first,
# or by pool; ties by longest wait, then pool and reason, so the order is stable.
PENDING_SORT_LABELS = {"wait": "longest wait", "count": "most pods", "pool": "pool"}
PENDING_SORTS = {
    "wait": lambda g: (-g.longest, g.pool, g.reason),
    "count": lambda g: (-g.count, -g.longest, g.pool, g.reason),
    "pool": lambda g: (g.pool == "", g.pool, -g.longest, g.reason),
}


def pending_groups(pending: list[PendingPod], *, sort: str = "wait") -> list[PendingGroup]:
    """`pending` grouped by the pool the pods ask for and their reason, in `sort` order."""
    by_key: dict[tuple[str, str, str], list[PendingPod]] = {}
    for item in pending:
        by_key.setdefault((item.pool, item.reason, item.reason_from), []).append(item)
    groups = [
        PendingGroup(pool, reason, reason_from, tuple(sorted(pods, key=lambda p: -p.waited)))
        for (pool, reason, reason_from), pods in by_key.items()
    ]
    return sorted(groups, key=PENDING_SORTS[sort])


def pending_pods(
    *, now: datetime, pool: Pool | None = None, cluster: FitCluster | None = None
) -> list[PendingPod]:
    """The GPU pods waiting now, longest first; `pool`: only those asking for that pool by
    selector or affinity (the pool key's value), or pinned to none and fitting there."""
    rows = list(GpuPod.objects.pending().order_by("created_at", "namespace", "name"))
    if not rows:
        return []
    cluster = cluster or fit_cluster()
    verdicts: dict[PodShape, PodVerdict] = {}
    result = []
    for row in rows:
        shape = pod_shape(pod_manifest(row))
        if shape not in verdicts:
            verdicts[shape] = evaluate_pod(
                shape, cluster.snapshot, priority_classes=cluster.priority_classes
            )
        verdict = verdicts[shape]
        lands = tuple(
            sorted(
                {cluster.snapshot.nodes[cluster.snapshot.index[n]].pool for n in verdict.nodes_fit}
            )
        )
        item = PendingPod(
            row,
            max(now - row.created_at, timedelta(0)),
            row.unschedulable_message
            or verdict.scheduler_message
            or "Fits now: waiting to be bound.",
            SCHEDULER if row.unschedulable_message else FIT_CHECK,
            verdict.fits,
            lands,
            wanted_pool(row.node_selector, row.affinity, cluster.pool_key),
        )
        if pool is None or wants_pool(row, pool.name, cluster.pool_key) or pool.name in lands:
            result.append(item)
    return result


def pending_pod_names(limit: int = 500) -> list[str]:
    """namespace/name of the pods waiting now, for the fit page's picker."""
    rows = GpuPod.objects.pending().order_by("namespace", "name").values_list("namespace", "name")
    return [f"{namespace}/{name}" for namespace, name in rows[:limit]]


def wants_pool(pod: GpuPod, pool: str, pool_key: str) -> bool:
    """The pod names the pool by its nodeSelector or a required affinity on the pool key."""
    if pod.node_selector.get(pool_key) == pool:
        return True
    node_affinity = (pod.affinity or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expression in term.get("matchExpressions") or []:
            if expression.get("key") == pool_key and pool in (expression.get("values") or []):
                return True
    return False


@dataclass(frozen=True)
class Intruder:
    pod: GpuPod
    taint: Taint  # the pool's taint the pod does not tolerate
    node_tainted: bool  # False: the node lacks the pool's taint (that is how the pod got in)


def pool_intruders(pool: Pool) -> list[Intruder]:
    """Pods running on the pool's nodes without a toleration of the pool's taint: they landed
    before the taint was set, or the node lacks it. A pool with no taint has no intruders."""
    if pool.taint is None or pool.taint.effect not in ("NoSchedule", "NoExecute"):
        return []
    taint = Taint(pool.taint.key, pool.taint.value, pool.taint.effect)
    on_pool = Node.objects.present().filter(pool=pool).values("name")
    pods: QuerySet[GpuPod] = GpuPod.objects.live().filter(node_name__in=on_pool)
    # Only the tolerations decide, and a pool's thousands of pods carry a few distinct
    # lists: each list is read once, from its stored text, and only intruders are loaded.
    untolerated: dict[str, bool] = {}
    ids = []
    stored = Cast("tolerations", output_field=TextField())
    for pk, text in pods.annotate(text=stored).values_list("pk", "text"):
        if text not in untolerated:
            tolerations = _tolerations(json.loads(text or "[]") or [])
            untolerated[text] = untolerated_taint([taint], tolerations) is not None
        if untolerated[text]:
            ids.append(pk)
    if not ids:
        return []
    intruders = list(GpuPod.objects.filter(pk__in=ids).order_by("node_name", "namespace", "name"))
    names = {pod.node_name for pod in intruders}
    taints = dict(Node.objects.present().filter(name__in=names).values_list("name", "taints"))
    return [
        Intruder(pod, taint, _carries(taints.get(pod.node_name, []), taint)) for pod in intruders
    ]


def _tolerations(raw: list[Any]) -> tuple[Toleration, ...]:
    """A stored tolerations list as the fit core reads it from a pod's spec."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tolerations", "namespace": "default"},
        "spec": {"containers": [{"name": "main"}], "tolerations": list(raw)},
    }
    return pod_shape(manifest).tolerations


def _carries(taints: list[dict[str, Any]], taint: Taint) -> bool:
    return any(t.get("key") == taint.key and t.get("effect") == taint.effect for t in taints)
