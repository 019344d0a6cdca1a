"""The GPU-fault drill: GPU 0 of the node reports a fatal XID for the hold (injected on the
cluster simulator), then the XID is cleared. Nothing else is changed: whether the cluster
moves the node's jobs, and whether the portal shows the XID, is what the drill finds out."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pools.core.drills import (
    FAULT_XID,
    GpuFaultObservation,
    gpu_fault_checks,
    jobs_on_node,
)
from pools.core.insights.readiness import Check
from pools.drills.node_down import hold_problem
from pools.drills.steps import DrillSteps, pending_for, pool_node_problem, spare_nodes
from pools.inventory import inventory_refresh_node
from pools.kube.faults import gpu_faults_problem, gpu_xid_clear, gpu_xid_inject
from pools.kube.nodes import read_node
from pools.metrics.dcgm import node_gpus
from pools.models import Drill, Pool

FAULTY_GPU = 0
# The portal sees the XID through Prometheus, which scrapes the exporter every 15-30 s on
# most clusters: a shorter hold would fail the "flagged" check for want of a scrape.
MIN_HOLD_SECONDS = 60


def validate(pool: Pool, node_name: str, hold_seconds: int) -> dict[str, str]:
    problems = {}
    if (problem := hold_problem(hold_seconds, least=MIN_HOLD_SECONDS)) is not None:
        problems["hold_seconds"] = problem
    if (problem := pool_node_problem(pool, node_name)) is not None:
        problems["node"] = problem
    elif not problems and (problem := gpu_faults_problem(node_name)) is not None:
        # Refused before anything is written: the drill would only fail at its start.
        problems["kind"] = f"A GPU-fault drill needs the cluster simulator: {problem}."
    return problems


def _pods_on(node_name: str) -> list[str]:
    """The node's job pods now, read from the API server (the row is refreshed on the way);
    DaemonSet and static pods stay on the node by design and are not counted."""
    row = inventory_refresh_node(read_node(node_name))
    return jobs_on_node(row.pods if row else [])


def begin(drill: Drill, now: datetime) -> dict[str, Any]:
    pods = _pods_on(drill.node_name)
    pending = pending_for(drill.pool)
    gpu_xid_inject(drill.node_name, FAULTY_GPU, FAULT_XID)
    return {"gpu": FAULTY_GPU, "xid": FAULT_XID, "pods_before": pods, "pending_before": pending}


def _xid_shown(node_name: str, gpu: int) -> tuple[int | None, str]:
    """The XID the node's figures show for the GPU (what the node page shows), or None and
    why not. A GPU without series is not a GPU without an XID: a failed scrape marks every
    series of its target stale, and the check must then say it does not know."""
    rows, error = node_gpus(node_name)
    if error:
        return None, error
    shown = next((row.xid for row in rows if row.index == str(gpu)), None)
    if shown is None:
        return None, f"Prometheus had no series for GPU {gpu} of {node_name} at the end of the hold"
    return shown, ""


def observe(drill: Drill, now: datetime) -> dict[str, Any]:
    xid, error = _xid_shown(drill.node_name, int(drill.observed.get("gpu", FAULTY_GPU)))
    return {
        "xid_seen": xid,
        "metrics_error": error,
        "pods_now": _pods_on(drill.node_name),
        "pending_during": pending_for(drill.pool),
        "spare_nodes": spare_nodes(drill.pool, drill.node_name),
    }


def restore(drill: Drill, now: datetime) -> bool:
    gpu_xid_clear(drill.node_name, int(drill.observed.get("gpu", FAULTY_GPU)))
    return True


def record(
    drill: Drill, during: dict[str, Any], restored: bool
) -> tuple[dict[str, Any], list[Check]]:
    seen = drill.observed
    before = tuple(seen.get("pods_before", ()))
    observation = GpuFaultObservation(
        node=drill.node_name,
        gpu=int(seen.get("gpu", FAULTY_GPU)),
        xid=int(seen.get("xid", FAULT_XID)),
        xid_seen=during["xid_seen"],
        metrics_error=during["metrics_error"],
        pods_before=before,
        pods_still=tuple(p for p in before if p in set(during["pods_now"])),
        pending_before=int(seen.get("pending_before", 0)),
        pending_during=during["pending_during"],
        spare_nodes=during["spare_nodes"],
        restored=restored,
    )
    return observation.as_dict(), gpu_fault_checks(observation)


STEPS = DrillSteps(validate, begin, observe, restore, record, begun="drill.gpu_fault")
