"""The node-down drill: the node is cordoned for the hold, then uncordoned."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pools.core.drills import MAX_HOLD_SECONDS, NodeDownObservation, node_down_checks
from pools.core.insights.readiness import Check
from pools.drills.steps import DrillSteps, pending_for, pool_node_problem, spare_nodes
from pools.inventory import inventory_refresh_node
from pools.kube.drain import set_unschedulable
from pools.models import Drill, MoveItem, Node, Pool

MIN_HOLD_SECONDS = 10


def hold_problem(hold_seconds: int, least: int = MIN_HOLD_SECONDS) -> str | None:
    if least <= hold_seconds <= MAX_HOLD_SECONDS:
        return None
    return f"Hold {least} to {MAX_HOLD_SECONDS} seconds."


def validate(pool: Pool, node_name: str, hold_seconds: int) -> dict[str, str]:
    problems = {}
    if (problem := hold_problem(hold_seconds)) is not None:
        problems["hold_seconds"] = problem
    if (problem := pool_node_problem(pool, node_name)) is not None:
        problems["node"] = problem
    elif MoveItem.objects.filter(node__name=node_name, active=True).exists():
        problems["node"] = f"{node_name} has an active move: drill another node."
    return problems


def begin(drill: Drill, now: datetime) -> dict[str, Any]:
    before = Node.objects.get(name=drill.node_name)
    pending = pending_for(drill.pool)
    row = inventory_refresh_node(set_unschedulable(drill.node_name, True))
    return {
        "flagged": bool(row and row.cordoned),
        "pods_before": len(before.pods),
        "pending_before": pending,
    }


def observe(drill: Drill, now: datetime) -> dict[str, int]:
    return {
        "pods_during": len(Node.objects.get(name=drill.node_name).pods),
        "pending_during": pending_for(drill.pool),
        "spare_nodes": spare_nodes(drill.pool, drill.node_name),
    }


def restore(drill: Drill, now: datetime) -> bool:
    row = inventory_refresh_node(set_unschedulable(drill.node_name, False))
    return bool(row and not row.cordoned)


def record(
    drill: Drill, during: dict[str, int], restored: bool
) -> tuple[dict[str, Any], list[Check]]:
    seen = drill.observed
    observation = NodeDownObservation(
        node=drill.node_name,
        flagged=bool(seen.get("flagged")),
        pods_before=int(seen.get("pods_before", 0)),
        pods_during=during["pods_during"],
        pending_before=int(seen.get("pending_before", 0)),
        pending_during=during["pending_during"],
        spare_nodes=during["spare_nodes"],
        restored=restored,
    )
    return observation.as_dict(), node_down_checks(observation)


STEPS = DrillSteps(validate, begin, observe, restore, record, begun="drill.node_down")
