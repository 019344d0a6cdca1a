"""The new-node drill: a GPU node with no pool label joins the cluster (a Node object, as a
kubelet registers one, tainted so no workload lands on it); at the end of the hold, which
spans at least one full inventory sync, the portal must show it as unassigned. Then it is
deleted and its row marked gone."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime

from pools.core.drills import (
    NodeJoinObservation,
    NodeShape,
    joining_node,
    node_join_checks,
)
from pools.core.insights.readiness import Check
from pools.drills.node_down import hold_problem
from pools.drills.steps import DrillSteps
from pools.inventory.rows import nodes_mark_gone
from pools.kube.nodes import node_create, node_delete
from pools.models import Drill, Node, Pool

# A pool with no node yet gets a node of this shape.
DEFAULT_SHAPE = NodeShape("NVIDIA-A100-SXM4-80GB", 8, 81920)


def node_name_for(drill_id: int) -> str:
    return f"drill-new-node-{drill_id}"


def validate(pool: Pool, node_name: str, hold_seconds: int) -> dict[str, str]:
    problems = {}
    sync = settings.INVENTORY_SYNC_SECONDS
    if (problem := hold_problem(hold_seconds, least=sync)) is not None:
        problems["hold_seconds"] = (
            f"{problem} A new node must be recognised within one inventory sync "
            f"(INVENTORY_SYNC_SECONDS={sync})."
        )
    if node_name:
        problems["node"] = "A new-node drill adds its own node: give no node."
    return problems


def _shape(pool: Pool) -> NodeShape:
    """The pool's most common node shape: the new node stands for a replacement."""
    shapes = Counter(
        NodeShape(*row)
        for row in Node.objects.present()
        .filter(pool=pool)
        .values_list("gpu_model", "gpu_count", "gpu_memory_mib")
    )
    return shapes.most_common(1)[0][0] if shapes else DEFAULT_SHAPE


def begin(drill: Drill, now: datetime) -> dict[str, Any]:
    node_create(joining_node(drill.node_name, _shape(drill.pool), drill.pk))
    return {"joined_at": now.isoformat()}


def observe(drill: Drill, now: datetime) -> dict[str, Any]:
    joined = parse_datetime(str(drill.observed.get("joined_at", "")))
    # The name is the drill's own: a row for it can only come from the inventory seeing it.
    row = Node.objects.present().filter(name=drill.node_name).select_related("pool").first()
    return {
        "seen": row is not None,
        "pool": row.pool.name if row is not None and row.pool is not None else "",
        "waited_seconds": int((now - joined).total_seconds()) if joined else 0,
    }


def restore(drill: Drill, now: datetime) -> bool:
    node_delete(drill.node_name)
    # Through the inventory's writer, so what is cached under its version is made again.
    nodes_mark_gone(Node.objects.filter(name=drill.node_name), now)
    return True


def record(
    drill: Drill, during: dict[str, Any], restored: bool
) -> tuple[dict[str, Any], list[Check]]:
    observation = NodeJoinObservation(node=drill.node_name, removed=restored, **during)
    return {**drill.observed, **observation.as_dict()}, node_join_checks(observation)


STEPS = DrillSteps(
    validate,
    begin,
    observe,
    restore,
    record,
    begun="drill.node_added",
    node_given=False,
    own_name=node_name_for,
)
