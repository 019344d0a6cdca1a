"""What each kind of drill does, as steps the runner (pools.drills) calls in order: check the
input, make the change (begin), look at the cluster and the portal at the end of the hold
(observe), undo the change (restore), and judge (record). The runner keeps the state
machine, the audit and the defined end; a kind only knows its own change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pools.common.cluster_access import pool_label_key
from pools.core.insights.readiness import Check
from pools.core.insights.scheduling import wanted_pool
from pools.models import Drill, GpuPod, Node, Pool


@dataclass(frozen=True)
class DrillSteps:
    # (pool, node, hold seconds) -> {field: problem}; empty when the drill may start.
    validate: Callable[[Pool, str, int], dict[str, str]]
    # Make the change; returns what was seen before it. Raises KubeError when it failed.
    begin: Callable[[Drill, datetime], dict[str, Any]]
    # What the cluster and the portal show at the end of the hold (changes nothing).
    observe: Callable[[Drill, datetime], Any]
    # Undo the change; True when the cluster is as before. Raises KubeError when it failed.
    restore: Callable[[Drill, datetime], bool]
    # (drill, observed, restored) -> (what to keep as observed, the checks).
    record: Callable[[Drill, Any, bool], tuple[dict[str, Any], list[Check]]]
    begun: str  # the audit action of the change
    node_given: bool = True  # the drill acts on a node of the pool the user names
    # A drill that makes its own object (a node, a pod) names it from the drill's id; the
    # name is kept in the drill's node_name.
    own_name: Callable[[int], str] | None = None


def pending_for(pool: Pool) -> int:
    """GPU pods waiting, unbound, that ask for the pool."""
    key = pool_label_key()
    return sum(
        wanted_pool(selector, affinity, key) == pool.name
        for selector, affinity in GpuPod.objects.pending()
        .filter(node_name="")
        .values_list("node_selector", "affinity")
    )


def spare_nodes(pool: Pool, but: str) -> int:
    """The pool's other schedulable nodes with every GPU free."""
    return (
        Node.objects.present()
        .filter(pool=pool, ready=True, cordoned=False, gpu_allocated=0)
        .exclude(name=but)
        .count()
    )


def pool_node_problem(pool: Pool, node_name: str) -> str | None:
    """Why `node_name` cannot be drilled on in `pool`, or None."""
    node = Node.objects.present().filter(name=node_name, pool=pool).first()
    if node is None:
        return f"{node_name or 'No node'} is not a node of pool {pool.name}."
    if not node.ready or node.cordoned:
        return f"{node_name} must be ready and schedulable for a drill."
    return None
