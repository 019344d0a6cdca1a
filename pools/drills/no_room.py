"""The lack-of-resources drill: a probe pod that asks the pool for one GPU more than any of
its nodes has free (its node selector and toleration are the pool's), so no node can take
it. At the end of the hold: did the scheduler keep it pending for want of GPUs, does the
portal's pending list show it so, and does the fit check say no node has room? Then it is
deleted. It holds nothing while it waits: a pending pod takes no GPU from anyone.

The probe is made in DRILL_NAMESPACE, which the portal's account may create and delete pods
in (the chart's Role); it carries activeDeadlineSeconds, so a probe whose deletion failed
ends by itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings

from pools.core.drills import NoRoomObservation, no_room_checks
from pools.core.insights.readiness import Check
from pools.drills.node_down import hold_problem
from pools.drills.probes import largest_free, namespace_of, pod_of, probe, probe_steps
from pools.fit.service import PodName, fit_check_run
from pools.kube.pods import pod_create, pod_read
from pools.models import Drill, GpuPod, Pool

# Long enough for the scheduler to answer and the watcher to see it, a few seconds each.
MIN_HOLD_SECONDS = 30


def probe_name(drill_id: int) -> str:
    return f"drill-no-room-{drill_id}"


def validate(pool: Pool, node_name: str, hold_seconds: int) -> dict[str, str]:
    problems = {}
    if (problem := hold_problem(hold_seconds, least=MIN_HOLD_SECONDS)) is not None:
        problems["hold_seconds"] = problem
    if node_name:
        problems["node"] = "A lack-of-resources drill makes its own pod: give no node."
    return problems


def begin(drill: Drill, now: datetime) -> dict[str, Any]:
    free = largest_free(drill.pool)
    pod_create(settings.DRILL_NAMESPACE, probe(drill, free + 1))
    return {"gpus": free + 1, "largest_free": free, "namespace": settings.DRILL_NAMESPACE}


def _scheduled(raw: dict[str, Any]) -> tuple[str, str]:
    """(the node it was bound to, the scheduler's refusal message)."""
    status = raw.get("status") or {}
    refused = next(
        (
            c.get("message", "")
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        ),
        "",
    )
    return (raw.get("spec") or {}).get("nodeName") or "", refused


def _fit(drill: Drill, namespace: str) -> tuple[bool | None, str]:
    """The fit check's verdict for the probe in its pool, and why it does not fit."""
    report = fit_check_run(pod=PodName(namespace, drill.node_name)).report
    if not report.workloads:
        return None, ""
    workload = report.workloads[0]
    found = next((p for p in workload.pools if p.pool == drill.pool.name), None)
    verdicts = found.templates if found is not None else workload.cluster
    message = "; ".join(v.message or ", ".join(r for r, _ in v.reasons) for v in verdicts)
    return (found.fits_now if found is not None else workload.fits_now), message


def observe(drill: Drill, now: datetime) -> dict[str, Any]:
    namespace = namespace_of(drill)
    bound, refused = _scheduled(pod_read(namespace, drill.node_name))
    row = GpuPod.objects.live().filter(namespace=namespace, name=drill.node_name).first()
    fits, why = _fit(drill, namespace) if row is not None else (None, "")
    return {
        "bound_to": bound,
        "scheduler_message": refused,
        "portal_message": row.unschedulable_message if row is not None else None,
        "fit_fits": fits,
        "fit_message": why,
    }


def record(
    drill: Drill, during: dict[str, Any], restored: bool
) -> tuple[dict[str, Any], list[Check]]:
    seen = drill.observed
    observation = NoRoomObservation(
        pod=pod_of(drill),
        gpus=int(seen.get("gpus", 0)),
        largest_free=int(seen.get("largest_free", 0)),
        removed=restored,
        **during,
    )
    return {**seen, **observation.as_dict()}, no_room_checks(observation)


STEPS = probe_steps(validate=validate, begin=begin, observe=observe, record=record, name=probe_name)
