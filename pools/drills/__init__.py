"""Drills: failure rehearsals on a pool with a defined end. A pool admin starts one; a worker
makes the change (a node cordoned, a GPU fault injected, a new node added), watches what the
portal and the pool do for the hold, then restores the cluster and records the checks. Every
step is audited; the beat ends a drill whose worker died, so nothing stays changed past the
drill's end, and retries a restore that failed until it succeeds."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from pools.audit import audit
from pools.common.errors import InvalidInput, NotAllowed, Refused
from pools.common.events import announce_drill_after_commit
from pools.common.roles import Capability, has_capability
from pools.core.insights.readiness import Status
from pools.drills import gpu_fault, new_node, no_room, node_down, timeout
from pools.drills.node_down import MIN_HOLD_SECONDS
from pools.drills.steps import DrillSteps
from pools.kube.errors import KubeError
from pools.models import Drill, Pool

__all__ = [
    "MIN_HOLD_SECONDS",
    "can_run_drills",
    "drill_begin",
    "drill_finish",
    "drill_start",
    "drills_end_overdue",
]

log = logging.getLogger(__name__)
# Time for the worker to make the change and restore, on top of the hold.
END_GRACE_SECONDS = 120
# A restore that keeps failing is retried by the beat this long after the drill's end, then
# left to an operator (the drill errors, saying so).
RESTORE_RETRY_SECONDS = 3600
START_FAILED = "start_failed"  # in `observed`: the start failed and could not be undone
STEPS: dict[str, DrillSteps] = {
    Drill.Kind.NODE_DOWN: node_down.STEPS,
    Drill.Kind.GPU_FAULT: gpu_fault.STEPS,
    Drill.Kind.NODE_JOINS: new_node.STEPS,
    Drill.Kind.NO_ROOM: no_room.STEPS,
    Drill.Kind.JOB_TIMEOUT: timeout.STEPS,
}


def can_run_drills(user: AbstractBaseUser) -> bool:
    """Who runs drills: pool admins. The page, the API and drill_start all ask here."""
    return has_capability(user, Capability.EDIT_POOLS)


def drill_start(
    *,
    pool: Pool,
    node_name: str,
    hold_seconds: int,
    user: AbstractBaseUser,
    now: datetime,
    kind: str = Drill.Kind.NODE_DOWN,
) -> Drill:
    """Record a drill and announce it (it runs after commit). Pool admins only; one drill at
    a time per pool; nothing is written when the input is refused."""
    if not can_run_drills(user):
        raise NotAllowed("forbidden", "Only pool admins run drills.")
    if kind not in STEPS:
        raise InvalidInput(
            "validation", f"Unknown drill kind {kind!r}.", {"kind": f"One of {', '.join(STEPS)}."}
        )
    if problems := STEPS[kind].validate(pool, node_name, hold_seconds):
        raise InvalidInput("validation", " ".join(problems.values()), problems)
    try:
        with transaction.atomic():
            drill = Drill.objects.create(
                pool=pool,
                kind=kind,
                node_name=node_name,
                hold_seconds=hold_seconds,
                started_by=user,
                ends_at=now + timedelta(seconds=hold_seconds + END_GRACE_SECONDS),
            )
            if (own_name := STEPS[kind].own_name) is not None:
                drill.node_name = own_name(drill.pk)
                drill.save(update_fields=["node_name"])
            audit(
                "drill.started",
                actor=user,
                node_name=drill.node_name,
                message=f"drill #{drill.pk} on {pool.name}: {drill.get_kind_display()} on "
                f"{drill.node_name} for {hold_seconds} s",
            )
            announce_drill_after_commit(drill.pk)
    except IntegrityError:
        raise Refused("drill_running", f"A drill is already running on pool {pool.name}.") from None
    return drill


def drill_begin(drill_id: int, *, now: datetime | None = None) -> Drill | None:
    """Make the drill's change (the worker's first step); None when another worker did. A
    change that failed is undone all the same (its answer may have been lost on the way)."""
    if not Drill.objects.filter(pk=drill_id, state=Drill.State.STARTING).update(
        state=Drill.State.RUNNING
    ):
        return None
    drill = Drill.objects.select_related("pool").get(pk=drill_id)
    steps = STEPS[drill.kind]
    at = now or drill.started_at
    try:
        drill.observed = steps.begin(drill, at)
    except KubeError as exc:
        return _start_failed(drill, steps, f"could not start the drill: {exc}", at)
    drill.save(update_fields=["observed"])
    audit(steps.begun, node_name=drill.node_name, message=f"drill #{drill.pk}: begun")
    return drill


def _start_failed(drill: Drill, steps: DrillSteps, message: str, now: datetime) -> Drill:
    """Undo what the failed start may have done; when that fails too, the drill stays
    running so the beat's sweep restores the cluster at its end, then records the error."""
    try:
        steps.restore(drill, now)
    except KubeError as exc:
        drill.observed = {START_FAILED: message}
        drill.save(update_fields=["observed"])
        return _restore_failed(drill, f"{message}; undoing it failed too: {exc}")
    return _errored(drill, message, finished_at=now)


def _errored(drill: Drill, message: str, *, finished_at: datetime | None = None) -> Drill:
    drill.state, drill.error = Drill.State.ERRORED, message
    drill.finished_at = drill.finished_at or finished_at
    with transaction.atomic():  # whoever sees the drill ended sees its audit event
        drill.save(update_fields=["state", "error", "finished_at"])
        audit("drill.errored", node_name=drill.node_name, message=f"drill #{drill.pk}: {message}")
    return drill


def _restore_failed(drill: Drill, message: str) -> Drill:
    """The drill stays running and its claim is released: the beat's sweep tries the restore
    again at the drill's end, and every 30 s after, until the cluster is back."""
    with transaction.atomic():
        Drill.objects.filter(pk=drill.pk).update(finished_at=None, error=message)
        audit(
            "drill.restore_failed",
            node_name=drill.node_name,
            message=f"drill #{drill.pk}: {message}",
        )
    drill.refresh_from_db()
    return drill


def _observe(drill: Drill, steps: DrillSteps, now: datetime) -> tuple[object | None, str]:
    """What the drill saw, or None and why not. Whatever broke (Prometheus, the database, a
    bug), the caller restores the cluster all the same."""
    if START_FAILED in drill.observed:
        return None, str(drill.observed[START_FAILED])
    try:
        return steps.observe(drill, now), ""
    except Exception as exc:
        log.exception("drill #%s: observing failed", drill.pk)
        return None, f"could not observe the drill ({type(exc).__name__}: {exc})"


def drill_finish(drill_id: int, *, now: datetime) -> Drill | None:
    """Observe, restore the cluster and record the checks; None when another worker finished
    it. The claim (finished_at set once) keeps the timer and the beat's sweep from both
    restoring. The cluster is restored even when the observation fails."""
    if not Drill.objects.filter(
        pk=drill_id, state=Drill.State.RUNNING, finished_at__isnull=True
    ).update(finished_at=now):
        return None
    drill = Drill.objects.select_related("pool").get(pk=drill_id)
    steps = STEPS[drill.kind]
    during, problem = _observe(drill, steps, now)
    try:
        restored = steps.restore(drill, now)
    except KubeError as exc:
        if now > drill.ends_at + timedelta(seconds=RESTORE_RETRY_SECONDS):
            return _errored(drill, f"gave up restoring after an hour: {exc}; restore by hand")
        return _restore_failed(drill, f"could not restore: {exc}")
    if during is None:
        return _errored(drill, f"{problem}; the cluster is restored")
    drill.observed, checks = steps.record(drill, during, restored)
    drill.checks = [
        {"name": c.name, "title": c.title, "status": str(c.status), "detail": c.detail}
        for c in checks
    ]
    passed = all(c.status == Status.PASS for c in checks)
    drill.state = Drill.State.PASSED if passed else Drill.State.FAILED
    drill.error = ""
    # One transaction: a reader that sees the drill ended also sees its audit event.
    with transaction.atomic():
        drill.save(update_fields=["observed", "checks", "state", "error"])
        audit(
            "drill.finished",
            node_name=drill.node_name,
            message=f"drill #{drill.pk} {drill.state}: "
            + "; ".join(f"{c.title}: {c.status}" for c in checks),
        )
    return drill


def drills_end_overdue(*, now: datetime) -> list[int]:
    """Drills past their end: a running one is finished (its change undone), one that never
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
