"""The rules a move must pass, at request time and again at execution (pure).

Plain facts in, failures out: whoever gathers the facts (the database, the API server, the
metrics) decides nothing here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


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


def move_checks(
    nodes: Sequence[NodeFacts],
    destination: PoolFacts,
    sources: dict[str, PoolFacts],
    *,
    reconcile: bool = False,
    health_override: str = "",
) -> list[CheckFailure]:
    failures: list[CheckFailure] = []
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            failures.append(CheckFailure(node.name, "duplicate", f"{node.name} is listed twice."))
            continue
        seen.add(node.name)
        if not node.present:
            failures.append(
                CheckFailure(node.name, "node_not_found", f"{node.name} is not a known GPU node.")
            )
            continue
        if node.active_move is not None:
            failures.append(
                CheckFailure(
                    node.name,
                    "active_move",
                    f"{node.name} already has an active move (#{node.active_move}): one at a time.",
                )
            )
        if reconcile:
            if node.pool != destination.name:
                failures.append(
                    CheckFailure(
                        node.name,
                        "not_in_pool",
                        f"{node.name} is not in pool {destination.name}: reconcile only brings a "
                        "node back to the pool it is in.",
                    )
                )
            elif not node.drifted:
                failures.append(
                    CheckFailure(
                        node.name,
                        "not_drifted",
                        f"{node.name} already matches pool {destination.name}: nothing to "
                        "reconcile.",
                    )
                )
            continue
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
        if destination.requires_healthy and not health_override:
            if node.has_metrics is None:
                failures.append(
                    CheckFailure(
                        node.name,
                        "health_unknown",
                        f"Pool {destination.name} requires healthy nodes and {node.name}'s "
                        "metrics are unavailable: give an override reason to move it anyway.",
                    )
                )
            elif not node.has_metrics:
                failures.append(
                    CheckFailure(
                        node.name,
                        "no_metrics",
                        f"Pool {destination.name} requires healthy nodes and no DCGM metrics "
                        f"arrive for {node.name}: give an override reason to move it anyway.",
                    )
                )
            elif node.xid_gpus:
                failures.append(
                    CheckFailure(
                        node.name,
                        "xid_errors",
                        f"Pool {destination.name} requires healthy nodes and {node.name} has "
                        f"{node.xid_gpus} GPU(s) with XID errors: give an override reason to move "
                        "it anyway.",
                    )
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
                    f"Pool {name} would keep {remaining} node(s), below its minimum of "
                    f"{pool.min_nodes} ({pool.present_nodes} now{already}, {count} in this "
                    "request).",
                )
            )
    return failures
