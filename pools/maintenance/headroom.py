"""A pool's maintenance headroom read from the inventory and the API server: its nodes and
their GPU pods (two queries, the moves' holds a third), and the cluster's
PodDisruptionBudgets (one LIST, kept for BUDGETS_CACHE_SECONDS: every page and API call
within that shares it). The figure itself is pools.core.headroom's."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from pools.core.headroom import (
    Blocker,
    Budget,
    Headroom,
    HeadroomNode,
    HeadroomPod,
    drain_blockers,
    headroom,
)
from pools.core.insights.queueing import GANG_OWNERS
from pools.kube.budgets import list_budgets
from pools.kube.errors import KubeError
from pools.models import GpuPod, MoveItem, Node, Pool

log = logging.getLogger(__name__)
_CACHE_KEY = "maintenance:budgets"


def cluster_budgets(*, fresh: bool = False) -> tuple[list[Budget], str | None]:
    """The cluster's disruption budgets, or none and why they could not be read. `fresh`:
    read now (a wave about to drain), not what a page read a few seconds ago."""
    kept = None if fresh else cache.get(_CACHE_KEY)
    if kept is not None:
        return kept, None
    try:
        budgets = list_budgets()
    except KubeError as error:
        log.warning("disruption budgets not read: %s", error)
        return [], f"the disruption budgets could not be read: {error}"
    cache.set(_CACHE_KEY, budgets, settings.BUDGETS_CACHE_SECONDS)
    return budgets, None


@dataclass(frozen=True)
class _Inputs:
    nodes: list[HeadroomNode]
    pods: list[HeadroomPod]
    budgets: list[Budget]
    error: str | None


def _inputs(pool: Pool, *, fresh: bool = False) -> _Inputs:
    """The pool's nodes (with the moves holding them) and their live GPU pods: three
    queries; and the cluster's budgets."""
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
    budgets, error = cluster_budgets(fresh=fresh)
    return _Inputs(nodes, pods, budgets, error)


def pool_headroom(
    pool: Pool, *, only: Collection[str] | None = None, fresh: bool = False
) -> Headroom:
    """How many of the pool's nodes can be drained together now, and what stops more; with
    `only`, of those nodes alone (pools.core.headroom.headroom)."""
    found = _inputs(pool, fresh=fresh)
    return headroom(
        pool.name,
        found.nodes,
        found.pods,
        found.budgets,
        min_nodes=pool.min_nodes,
        budgets_error=found.error,
        only=only,
    )


@dataclass(frozen=True)
class DrainFit:
    """Draining some of a pool's nodes together, now: what would stop it."""

    pool: str
    draining: tuple[str, ...]
    blockers: tuple[Blocker, ...]
    budgets_error: str | None = None

    @property
    def within(self) -> bool | None:
        """Whether nothing stops it (None: the budgets are not known)."""
        return None if self.budgets_error else not self.blockers


def drain_fits(nodes: Iterable[Node]) -> list[DrainFit]:
    """For each pool the nodes come from, what would stop draining them together now (a
    move's preview with drain-first)."""
    by_pool: dict[str, list[str]] = defaultdict(list)
    pools: dict[str, Pool] = {}
    for node in nodes:
        if node.pool is not None:
            by_pool[node.pool.name].append(node.name)
            pools[node.pool.name] = node.pool
    found = []
    for name in sorted(by_pool):
        draining = tuple(sorted(by_pool[name]))
        inputs = _inputs(pools[name])
        blockers = drain_blockers(inputs.nodes, inputs.pods, inputs.budgets, draining)
        found.append(DrainFit(name, draining, tuple(blockers), inputs.error))
    return found
