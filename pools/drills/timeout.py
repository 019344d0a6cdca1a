"""The job-timeout drill: a probe pod, as a Job's pod with `activeDeadlineSeconds` in its
template, asks the pool for one GPU, runs and outlives its deadline. At the end of the
hold: did the cluster (the kubelet) fail it with DeadlineExceeded, and do the portal's
insights count that failure as a timeout rather than "other"? Then it is deleted.

A bare pod rather than a Job: the kubelet enforces the pod's own deadline, which is what a
job's timeout is on its pods, and a Job would leave the retries and their pods to the
Job controller. The pod holds one GPU for its deadline, so the drill needs one free."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings

from pools.core.drills import TIMEOUT_DEADLINE_SECONDS, TimeoutObservation, timeout_checks
from pools.core.insights.failures import classify
from pools.core.insights.readiness import Check
from pools.core.insights.records import HistoryPod
from pools.drills.node_down import hold_problem
from pools.drills.probes import largest_free, namespace_of, pod_of, probe, probe_steps
from pools.kube.pods import pod_create, pod_read
from pools.models import Drill, GpuPod, Pool

# The deadline, the kubelet's reaction and the watcher's, with room to spare.
MIN_HOLD_SECONDS = 60


def probe_name(drill_id: int) -> str:
    return f"drill-timeout-{drill_id}"


def validate(pool: Pool, node_name: str, hold_seconds: int) -> dict[str, str]:
    problems = {}
    if (problem := hold_problem(hold_seconds, least=MIN_HOLD_SECONDS)) is not None:
        problems["hold_seconds"] = problem
    if node_name:
        problems["node"] = "A job-timeout drill makes its own pod: give no node."
    elif not problems and largest_free(pool) < 1:
        problems["pool"] = (
            f"Pool {pool.name} has no free GPU on a ready node now: the probe job could not "
            "start, and a job that never starts cannot time out."
        )
    return problems


def begin(drill: Drill, now: datetime) -> dict[str, Any]:
    pod = probe(drill, 1)
    pod["spec"]["activeDeadlineSeconds"] = TIMEOUT_DEADLINE_SECONDS
    pod["metadata"]["labels"]["job-name"] = drill.node_name
    pod_create(settings.DRILL_NAMESPACE, pod)
    return {"deadline_seconds": TIMEOUT_DEADLINE_SECONDS, "namespace": settings.DRILL_NAMESPACE}


def _epoch(at: datetime | None) -> float | None:
    return at.timestamp() if at is not None else None


def _cause(row: GpuPod) -> str:
    """The failure class the insights give the portal's record of the pod."""
    record = HistoryPod(
        row.namespace, row.name, row.node_name, row.pool_label, row.phase, row.gpus, 0, 0,
        "", "", row.created_at.timestamp(), _epoch(row.scheduled_at), _epoch(row.started_at),
        _epoch(row.finished_at), row.termination_reason, row.exit_code,
        row.termination_message, row.waiting_reason, row.restarts,
    )  # fmt: skip
    return str(classify(record))


def observe(drill: Drill, now: datetime) -> dict[str, Any]:
    namespace = namespace_of(drill)
    raw = pod_read(namespace, drill.node_name)
    status = raw.get("status") or {}
    row = GpuPod.objects.filter(namespace=namespace, name=drill.node_name).first()
    ended = row is not None and row.phase == GpuPod.Phase.FAILED
    return {
        "started": bool(status.get("startTime")),
        "phase": str(status.get("phase") or ""),
        "cluster_reason": str(status.get("reason") or ""),
        "portal_reason": row.termination_reason if ended and row is not None else None,
        "portal_cause": _cause(row) if ended and row is not None else None,
    }


def record(
    drill: Drill, during: dict[str, Any], restored: bool
) -> tuple[dict[str, Any], list[Check]]:
    seen = drill.observed
    observation = TimeoutObservation(
        pod=pod_of(drill),
        deadline_seconds=int(seen.get("deadline_seconds", TIMEOUT_DEADLINE_SECONDS)),
        removed=restored,
        **during,
    )
    return {**seen, **observation.as_dict()}, timeout_checks(observation)


STEPS = probe_steps(validate=validate, begin=begin, observe=observe, record=record, name=probe_name)
