"""Drills: rehearsing a node going down on a pool, with a defined end. A pool admin starts
one; a worker cordons the node, watches what the portal and the pool do for the hold, then
uncordons it and records the checks. Every step is audited; the beat ends a drill whose
worker died, so no node stays down past the drill's end."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from pools.audit import audit
from pools.core.insights.drills import MAX_HOLD_SECONDS, NodeDownObservation, node_down_checks
from pools.core.insights.readiness import Status
from pools.core.insights.scheduling import wanted_pool
from pools.errors import InvalidInput, WorkflowError
from pools.events import announce_drill_after_commit
from pools.inventory import inventory_refresh_node
from pools.kube.drain import set_unschedulable
from pools.kube.errors import KubeError
from pools.models import Drill, GpuPod, MoveItem, Node, Pool
from pools.roles import Capability
from pools.workflow.rules import require_capability

MIN_HOLD_SECONDS = 10
# Time for the worker to cordon and restore, on top of the hold.
END_GRACE_SECONDS = 120


def _node_problem(pool: Pool, node_name: str) -> str | None:
    node = Node.objects.present().filter(name=node_name, pool=pool).first()
    if node is None:
        return f"{node_name or 'No node'} is not a node of pool {pool.name}."
    if not node.ready or node.cordoned:
        return f"{node_name} must be ready and schedulable to be taken down."
    if MoveItem.objects.filter(node=node, active=True).exists():
        return f"{node_name} has an active move: drill another node."
    return None


def drill_start(
    *, pool: Pool, node_name: str, hold_seconds: int, user: AbstractBaseUser, now: datetime
) -> Drill:
    """Record a node-down drill and announce it (it runs after commit). Pool admins only;
    one drill at a time per pool."""
    require_capability(user, Capability.EDIT_POOLS, "run drills")
    problems = {}
    if not MIN_HOLD_SECONDS <= hold_seconds <= MAX_HOLD_SECONDS:
        problems["hold_seconds"] = (
            f"Hold the node down {MIN_HOLD_SECONDS} to {MAX_HOLD_SECONDS} seconds."
        )
    if (problem := _node_problem(pool, node_name)) is not None:
        problems["node"] = problem
    if problems:
        raise InvalidInput("validation", " ".join(problems.values()), problems)
    try:
        with transaction.atomic():
            drill = Drill.objects.create(
                pool=pool,
                node_name=node_name,
                hold_seconds=hold_seconds,
                started_by=user,
                ends_at=now + timedelta(seconds=hold_seconds + END_GRACE_SECONDS),
            )
            audit(
                "drill.started",
                actor=user,
                node_name=node_name,
                message=f"drill #{drill.pk} on {pool.name}: {node_name} down for {hold_seconds} s",
            )
            announce_drill_after_commit(drill.pk)
    except IntegrityError:
        raise WorkflowError(
            "drill_running", f"A drill is already running on pool {pool.name}."
        ) from None
    return drill


def _pending_for(pool: Pool) -> int:
    """GPU pods waiting, unbound, that ask for the pool."""
    key = settings.POOL_LABEL_KEY
    return sum(
        wanted_pool(selector, affinity, key) == pool.name
        for selector, affinity in GpuPod.objects.pending()
        .filter(node_name="")
        .values_list("node_selector", "affinity")
    )


def _spare_nodes(pool: Pool, but: str) -> int:
    return (
        Node.objects.present()
        .filter(pool=pool, ready=True, cordoned=False, gpu_allocated=0)
        .exclude(name=but)
        .count()
    )


def drill_begin(drill_id: int) -> Drill | None:
    """Take the drill's node down (the worker's first step); None when another worker did."""
    if not Drill.objects.filter(pk=drill_id, state=Drill.State.STARTING).update(
        state=Drill.State.RUNNING
    ):
        return None
    drill = Drill.objects.select_related("pool").get(pk=drill_id)
    before = Node.objects.get(name=drill.node_name)
    try:
        row = inventory_refresh_node(set_unschedulable(drill.node_name, True))
    except KubeError as exc:
        return _errored(drill, f"could not cordon {drill.node_name}: {exc}")
    drill.observed = {
        "flagged": bool(row and row.cordoned),
        "pods_before": len(before.pods),
        "pending_before": _pending_for(drill.pool),
    }
    drill.save(update_fields=["observed"])
    audit("drill.node_down", node_name=drill.node_name, message=f"drill #{drill.pk}: cordoned")
    return drill


def _errored(drill: Drill, message: str) -> Drill:
    drill.state, drill.error = Drill.State.ERRORED, message
    drill.save(update_fields=["state", "error"])
    audit("drill.errored", node_name=drill.node_name, message=f"drill #{drill.pk}: {message}")
    return drill


def drill_finish(drill_id: int, *, now: datetime) -> Drill | None:
    """Restore the node and record the checks; None when another worker finished it. The
    claim (finished_at set once) keeps the timer and the beat's sweep from both restoring."""
    if not Drill.objects.filter(
        pk=drill_id, state=Drill.State.RUNNING, finished_at__isnull=True
    ).update(finished_at=now):
        return None
    drill = Drill.objects.select_related("pool").get(pk=drill_id)
    during = Node.objects.get(name=drill.node_name)
    pending_during, spare = _pending_for(drill.pool), _spare_nodes(drill.pool, drill.node_name)
    try:
        row = inventory_refresh_node(set_unschedulable(drill.node_name, False))
    except KubeError as exc:
        return _errored(drill, f"could not uncordon {drill.node_name}: {exc}")
    seen = drill.observed
    observation = NodeDownObservation(
        node=drill.node_name,
        flagged=bool(seen.get("flagged")),
        pods_before=int(seen.get("pods_before", 0)),
        pods_during=len(during.pods),
        pending_before=int(seen.get("pending_before", 0)),
        pending_during=pending_during,
        spare_nodes=spare,
        restored=bool(row and not row.cordoned),
    )
    checks = node_down_checks(observation)
    passed = all(c.status == Status.PASS for c in checks)
    drill.observed = observation.as_dict()
    drill.checks = [
        {"name": c.name, "title": c.title, "status": str(c.status), "detail": c.detail}
        for c in checks
    ]
    drill.state = Drill.State.PASSED if passed else Drill.State.FAILED
    drill.save(update_fields=["observed", "checks", "state"])
    audit(
        "drill.finished",
        node_name=drill.node_name,
        message=f"drill #{drill.pk} {drill.state}: "
        + "; ".join(f"{c.title}: {c.status}" for c in checks),
    )
    return drill


def drills_end_overdue(*, now: datetime) -> list[int]:
    """Drills past their end: a running one is finished (its node restored), one that never
    started is recorded as errored. Returns their ids."""
    ended = []
    for pk, state in Drill.objects.filter(
        state__in=Drill.ACTIVE_STATES, ends_at__lt=now, finished_at__isnull=True
    ).values_list("pk", "state"):
        if state == Drill.State.RUNNING:
            drill_finish(pk, now=now)
        elif Drill.objects.filter(pk=pk, state=Drill.State.STARTING).update(
            state=Drill.State.ERRORED, error="never started (is a worker running?)", finished_at=now
        ):
            audit("drill.errored", message=f"drill #{pk}: never started")
        ended.append(pk)
    return ended
