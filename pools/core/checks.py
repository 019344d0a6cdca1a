"""The rules a move must pass, at request time and again at execution (pure).

Plain facts in, failures out: whoever gathers the facts (the database, the API server, the
metrics) decides nothing here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pools.core.labels import counted


@dataclass(frozen=True)
class NodeFacts:
    name: str
    present: bool  # in the inventory and not gone
    pool: str | None  # the pool the node is in now (by its label)
    gpu_model: str = ""
    drifted: bool = False
    active_move: int | None = None  # another request that holds the node
    xid_gpus: int | None = None  # None: unknown (no metrics)
    has_metrics: bool | None = None  # None: Prometheus unavailable


@dataclass(frozen=True)
class PoolFacts:
    name: str
    min_nodes: int = 0
    accepted_models: tuple[str, ...] = ()
    requires_healthy: bool = False
    present_nodes: int = 0
    leaving: int = 0  # nodes already on their way out in other active moves


@dataclass(frozen=True)
class CheckFailure:
    node: str | None  # None: the request as a whole
    code: str
    message: str

    def as_dict(self) -> dict[str, str | None]:
        return {"node": self.node, "code": self.code, "message": self.message}


def _reconcile_failures(node: NodeFacts, destination: PoolFacts) -> list[CheckFailure]:
    """A reconcile only brings a drifted node back to the pool it is in."""
    if node.pool != destination.name:
        return [
            CheckFailure(
                node.name,
                "not_in_pool",
                f"{node.name} is not in pool {destination.name}: reconcile only brings a "
                "node back to the pool it is in.",
            )
        ]
    if not node.drifted:
        return [
            CheckFailure(
                node.name,
                "not_drifted",
                f"{node.name} already matches pool {destination.name}: nothing to reconcile.",
            )
        ]
    return []


def _fit_failures(node: NodeFacts, destination: PoolFacts) -> list[CheckFailure]:
    """Whether the destination takes the node at all: not the pool it is in, and a GPU
    model the pool accepts."""
    failures = []
    if node.pool == destination.name:
        failures.append(
            CheckFailure(
                node.name, "same_pool", f"{node.name} is already in pool {destination.name}."
            )
        )
    if destination.accepted_models and node.gpu_model not in destination.accepted_models:
        accepted = ", ".join(destination.accepted_models)
        failures.append(
            CheckFailure(
                node.name,
                "gpu_model",
                f"{node.name} has {node.gpu_model or 'an unknown GPU'}; pool "
                f"{destination.name} accepts only {accepted}.",
            )
        )
    return failures


def _health_failures(node: NodeFacts, destination: PoolFacts) -> list[CheckFailure]:
    """A pool that requires healthy nodes refuses a node whose health is unknown, whose
    monitoring is missing, or that has XID errors (an override reason lifts this)."""
    why = f"Pool {destination.name} requires healthy nodes and"
    override = "give an override reason to move it anyway."
    if node.has_metrics is None:
        code, problem = "health_unknown", f"{node.name}'s metrics are unavailable"
    elif not node.has_metrics:
        code, problem = "no_metrics", f"no DCGM metrics arrive for {node.name}"
    elif node.xid_gpus:
        code, problem = (
            "xid_errors",
            f"{node.name} has {counted(node.xid_gpus, 'GPU')} with XID errors",
        )
    else:
        return []
    return [CheckFailure(node.name, code, f"{why} {problem}: {override}")]


def _node_failures(
    node: NodeFacts, destination: PoolFacts, *, reconcile: bool, health_override: str
) -> list[CheckFailure]:
    if not node.present:
        return [CheckFailure(node.name, "node_not_found", f"{node.name} is not a known GPU node.")]
    failures = []
    if node.active_move is not None:
        failures.append(
            CheckFailure(
                node.name,
                "active_move",
                f"{node.name} already has an active move (#{node.active_move}): one at a time.",
            )
        )
    if reconcile:
        return failures + _reconcile_failures(node, destination)
    failures += _fit_failures(node, destination)
    if destination.requires_healthy and not health_override:
        failures += _health_failures(node, destination)
    return failures


def move_checks(
    nodes: Sequence[NodeFacts],
    destination: PoolFacts,
    sources: dict[str, PoolFacts],
    *,
    reconcile: bool = False,
    health_override: str = "",
) -> list[CheckFailure]:
    """Every reason the move may not be asked, node by node, then the source pools'
    floors (a reconcile moves nothing out of a pool)."""
    failures: list[CheckFailure] = []
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            failures.append(CheckFailure(node.name, "duplicate", f"{node.name} is listed twice."))
            continue
        seen.add(node.name)
        failures += _node_failures(
            node, destination, reconcile=reconcile, health_override=health_override
        )
    if not reconcile:
        failures += capacity_floor(nodes, destination, sources)
    return failures


def capacity_floor(
    nodes: Sequence[NodeFacts], destination: PoolFacts, sources: dict[str, PoolFacts]
) -> list[CheckFailure]:
    """The source pools keep at least their minimum after every active move, this one too."""
    leaving = Counter(n.pool for n in nodes if n.present and n.pool and n.pool != destination.name)
    failures = []
    for name, count in sorted(leaving.items()):
        pool = sources.get(name)
        if pool is None:
            continue
        remaining = pool.present_nodes - pool.leaving - count
        if remaining < pool.min_nodes:
            already = f", {pool.leaving} already leaving in other moves" if pool.leaving else ""
            failures.append(
                CheckFailure(
                    None,
                    "capacity_floor",
                    f"Pool {name} would keep {counted(remaining, 'node')}, below its minimum of "
                    f"{pool.min_nodes} ({pool.present_nodes} now{already}, {count} in this "
                    "request).",
                )
            )
    return failures
