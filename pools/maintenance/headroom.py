"""A pool's maintenance headroom read from the inventory and the API server: its nodes and
their GPU pods (two queries, the moves' holds a third), and the cluster's
PodDisruptionBudgets (one LIST, kept for BUDGETS_CACHE_SECONDS: every page and API call
within that shares it). The figure itself is pools.core.headroom's."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import cache

from pools.core.headroom import Budget, Headroom, HeadroomNode, HeadroomPod, headroom
from pools.core.insights.queueing import GANG_OWNERS
from pools.kube.budgets import list_budgets
from pools.kube.errors import KubeError
from pools.models import GpuPod, MoveItem, Node, Pool

log = logging.getLogger(__name__)
_CACHE_KEY = "maintenance:budgets"


def cluster_budgets() -> tuple[list[Budget], str | None]:
    """The cluster's disruption budgets, or none and why they could not be read."""
    kept = cache.get(_CACHE_KEY)
    if kept is not None:
        return kept, None
    try:
        budgets = list_budgets()
    except KubeError as error:
        log.warning("disruption budgets not read: %s", error)
        return [], f"the disruption budgets could not be read: {error}"
    cache.set(_CACHE_KEY, budgets, settings.BUDGETS_CACHE_SECONDS)
    return budgets, None


def pool_headroom(pool: Pool) -> Headroom:
    """How many of the pool's nodes can be drained together now, and what stops more."""
    rows = list(Node.objects.present().filter(pool=pool).values_list("name", "cordoned", "ready"))
    names = [name for name, _, _ in rows]
    moving = set(
        MoveItem.objects.filter(active=True, node__name__in=names).values_list(
            "node__name", flat=True
        )
    )
    nodes = [HeadroomNode(n, cordoned, ready, n in moving) for n, cordoned, ready in rows]
    pods = [
        HeadroomPod(
            namespace,
            name,
            node,
            labels or {},
            f"{kind} {namespace}/{owner}" if kind in GANG_OWNERS and owner else "",
        )
        for namespace, name, node, labels, kind, owner in GpuPod.objects.live()
        .filter(node_name__in=names)
        .values_list("namespace", "name", "node_name", "labels", "owner_kind", "owner_name")
    ]
    budgets, error = cluster_budgets()
    return headroom(pool.name, nodes, pods, budgets, min_nodes=pool.min_nodes, budgets_error=error)
