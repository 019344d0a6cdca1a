"""Applying an approved move: per node, claimed, checked again, patched once, recorded.

Nothing here trusts the message queue to remember anything: the database holds each node's
progress, a worker claims a node with a lease, and the sweep re-enqueues what a dead worker
left. A node that already matches its destination (say, the worker died after its PATCH and
before recording it) is recorded as unchanged without a second PATCH.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from pools import log_context, observability
from pools.audit import audit
from pools.core.checks import NodeFacts, PoolFacts, capacity_floor
from pools.core.labels import counted
from pools.core.notices import Event
from pools.core.snapshot import node_record
from pools.errors import (
    CapacityFloorReached,
    DrainDeadlinePassed,
    NodeMovedSinceRequest,
    NodeNotMoved,
)
from pools.events import announce_event_after_commit
from pools.inventory import inventory_refresh_node
from pools.kube import drain
from pools.kube.errors import KubeError
from pools.kube.nodes import Raw, read_node
from pools.kube.patcher import apply_pool, plan
from pools.models import MoveItem, MoveRequest, Node, Pool
from pools.workflow.transitions import release_nodes, state_transition

log = logging.getLogger(__name__)
# How long after its grace period a pod may take to disappear (the kubelet's final delete).
TERMINATION_SLACK_SECONDS = 10
State = MoveRequest.State
ItemState = MoveItem.State


def start_request(request_id: int, *, now: datetime | None = None) -> list[int]:
    """Claim an approved request for execution; the item ids to run (none if not ours)."""
    now = now or timezone.now()
    log_context.bind(move_id=request_id)
    with transaction.atomic():
        if state_transition(request_id, [State.APPROVED], State.EXECUTING, started_at=now):
            audit("move.executing", request=MoveRequest.objects.get(pk=request_id))
        elif not MoveRequest.objects.filter(pk=request_id, state=State.EXECUTING).exists():
            return []  # finished, rejected, cancelled: never applied again
    return runnable_items(request_id, now=now)


def runnable_items(request_id: int, *, now: datetime) -> list[int]:
    return list(
        MoveItem.objects.filter(request_id=request_id)
        .filter(Q(state=ItemState.PENDING) | Q(state=ItemState.RUNNING, lease_until__lt=now))
        .values_list("id", flat=True)
    )


def _claim(item_id: int, now: datetime) -> MoveItem | None:
    lease = now + timedelta(seconds=settings.MOVE_LEASE_SECONDS)
    claimed = MoveItem.objects.filter(
        Q(state=ItemState.PENDING) | Q(state=ItemState.RUNNING, lease_until__lt=now),
        pk=item_id,
        request__state=State.EXECUTING,
    ).update(state=ItemState.RUNNING, lease_until=lease, attempts=F("attempts") + 1)
    if not claimed:
        return None
    return MoveItem.objects.select_related("request__destination", "node", "source_pool").get(
        pk=item_id
    )


def _check_capacity(item: MoveItem) -> None:
    """The source pool keeps its minimum, counting this node and every other node still on
    its way out (this request's included)."""
    source = item.source_pool
    request = item.request
    if source is None or source.pk == request.destination_id:
        return
    present = Node.objects.present().filter(pool=source).count()
    leaving = (
        MoveItem.objects.filter(active=True, source_pool=source)
        .exclude(state__in=MoveItem.FINISHED)
        .exclude(pk=item.pk)
        .exclude(request__destination=source)
        .count()
    )
    failures = capacity_floor(
        [NodeFacts(item.node.name, present=True, pool=source.name)],
        PoolFacts(request.destination.name),
        {
            source.name: PoolFacts(
                source.name, source.min_nodes, present_nodes=present, leaving=leaving
            )
        },
    )
    if failures:
        raise CapacityFloorReached(failures[0].message)


def _drain(item: MoveItem) -> None:
    """Drain-first: cordon, then evict the GPU pods (a disruption budget may refuse, and is
    asked again) until none is left or the deadline passes."""
    request = item.request
    name = item.node.name
    drain.set_unschedulable(name, True)
    audit("node.cordoned", request=request, node_name=name, message="drain-first: cordoned")
    deadline = time.monotonic() + request.drain_deadline_seconds
    # Pod -> when it must be gone: an evicted pod stays listed while it terminates, for up to
    # its grace period. It is leaving: never evicted twice, and not held against the deadline
    # while its grace period runs.
    leaving: dict[str, float] = {}
    while True:
        pods = drain.gpu_pods_on(name)
        if not pods:
            audit(
                "node.drained",
                request=request,
                node_name=name,
                message="no GPU pods left on the node",
            )
            return
        now = time.monotonic()
        for pod in pods:
            if str(pod) in leaving:
                continue
            if pod.terminating:
                leaving[str(pod)] = now + pod.grace_seconds
                continue
            refused = drain.evict(pod)
            audit(
                "pod.eviction_refused" if refused else "pod.evicted",
                request=request,
                node_name=name,
                message=f"{pod}" + (f": {refused}" if refused else ""),
            )
            if not refused:
                leaving[str(pod)] = now + pod.grace_seconds
        _check_drain_deadline(request, pods, leaving, deadline)
        time.sleep(settings.DRAIN_POLL_SECONDS)


def _check_drain_deadline(
    request: MoveRequest, pods: list[drain.PodRef], leaving: dict[str, float], deadline: float
) -> None:
    now = time.monotonic()
    if now < deadline:
        return
    # A terminating pod is given its grace period (and the kubelet a moment to report it
    # gone) even past the drain deadline: it leaves whatever the move does.
    slack = settings.DRAIN_POLL_SECONDS + TERMINATION_SLACK_SECONDS
    stuck = [p for p in pods if str(p) not in leaving or now > leaving[str(p)] + slack]
    if stuck:
        left = ", ".join(str(p) for p in stuck)
        raise DrainDeadlinePassed(
            f"drain deadline of {request.drain_deadline_seconds}s passed with "
            f"GPU pods still on the node: {left}"
        )


@dataclass
class _Cordon:
    """Whether this run left the node cordoned, so a failure uncordons it."""

    on: bool = False


def _unchanged(item: MoveItem, raw: Raw) -> str:
    """Already as the destination wants it: maybe our own PATCH before a crash."""
    if node_record(raw)["unschedulable"] and (
        item.request.drain_policy == MoveRequest.DrainPolicy.DRAIN_FIRST
    ):
        raw = drain.set_unschedulable(item.node.name, False)
    return _finish(
        item,
        ItemState.UNCHANGED,
        before=node_record(raw),
        after=node_record(raw),
        raw=raw,
        message="already as the destination wants it: no PATCH sent",
    )


def _check_where_asked(item: MoveItem, raw: Raw) -> None:
    label = (raw.get("metadata") or {}).get("labels", {}).get(settings.POOL_LABEL_KEY, "")
    if label != item.source_label:
        raise NodeMovedSinceRequest(
            f"node changed since the request: it was in {item.source_label or 'no pool'}"
            f" and is now in {label or 'no pool'}"
        )


def _apply(item: MoveItem, cordon: _Cordon) -> str:
    """Read the node, check it again, drain it if asked, patch it once, record it."""
    request = item.request
    name = item.node.name
    raw = read_node(name)
    pools = [p.spec() for p in Pool.objects.active()]
    destination = request.destination.spec()
    _, _, diff = plan(raw, destination, pools)
    if diff.is_empty:
        return _unchanged(item, raw)
    _check_where_asked(item, raw)
    if request.kind != MoveRequest.Kind.RECONCILE:
        _check_capacity(item)
    before = node_record(raw)
    if request.drain_policy == MoveRequest.DrainPolicy.DRAIN_FIRST:
        cordon.on = True
        _drain(item)
    result = apply_pool(name, destination, pools)
    state = ItemState.DONE if result.patched else ItemState.UNCHANGED
    message = result.diff.summary() + (
        f" ({counted(result.conflicts, 'conflict')} re-read)" if result.conflicts else ""
    )
    raw = result.raw
    after = node_record(raw)
    recorded = False
    if cordon.on:
        # The timeline reads in the order things happened: the patch, then the uncordon.
        _record_item_event(item, state, message=message, before=before, after=after)
        recorded = True
        raw = drain.set_unschedulable(name, False)
        cordon.on = False
        audit("node.uncordoned", request=request, node_name=name)
    return _finish(
        item,
        state,
        before=before,
        after=after,
        raw=raw,
        applied=result.diff.as_dict(),
        message=message,
        recorded=recorded,
    )


def execute_item(item_id: int, *, final_attempt: bool = True) -> str | None:
    """Run one node of a move. Returns the item's final state, or None when another worker
    holds it or the request is not executing. Raises KubeUnavailable for Celery to retry
    (the item goes back to pending) unless this is the final attempt."""
    item = _claim(item_id, timezone.now())
    if item is None:
        return None
    log_context.bind(move_id=item.request_id)
    cordon = _Cordon()
    try:
        return _apply(item, cordon)
    except NodeNotMoved as exc:
        _uncordon_after_failure(item, cordon.on)
        return _finish(item, ItemState.FAILED, message=str(exc))
    except KubeError as exc:
        _uncordon_after_failure(item, cordon.on)
        if exc.transient and not final_attempt:
            MoveItem.objects.filter(pk=item.pk).update(state=ItemState.PENDING, lease_until=None)
            audit("node.retrying", request=item.request, node_name=item.node.name, message=str(exc))
            raise
        return _finish(item, ItemState.FAILED, message=str(exc))


def _uncordon_after_failure(item: MoveItem, cordoned: bool) -> None:
    if not cordoned:
        return
    try:
        drain.set_unschedulable(item.node.name, False)
        audit(
            "node.uncordoned",
            request=item.request,
            node_name=item.node.name,
            message="after a failed drain-first move",
        )
    except KubeError as exc:
        audit(
            "node.uncordon_failed",
            request=item.request,
            node_name=item.node.name,
            message=f"the node is still cordoned: {exc}",
        )


def _finish(
    item: MoveItem,
    state: str,
    *,
    message: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    raw: dict[str, Any] | None = None,
    applied: dict[str, Any] | None = None,
    recorded: bool = False,
) -> str:
    """End the item in `state` (compare-and-swap from running) and record it, unless the
    caller has `recorded` its event already (at the moment it happened)."""
    request = item.request
    if raw is not None:
        # First the inventory, then the record: whoever sees the move finished sees the
        # node where it now is.
        try:
            inventory_refresh_node(raw)
        except KubeError as exc:
            log.warning("inventory refresh of %s failed: %s", item.node.name, exc)
    now = timezone.now()
    with transaction.atomic():
        updated = MoveItem.objects.filter(pk=item.pk, state=ItemState.RUNNING).update(
            state=state,
            finished_at=now,
            lease_until=None,
            error=message if state == ItemState.FAILED else "",
            before=before or {},
            after=after or {},
            applied_diff=applied or {},
        )
        if not updated:
            return MoveItem.objects.get(pk=item.pk).state
        if not recorded:
            _record_item_event(item, state, message=message, before=before, after=after)
        _finish_request_if_done(request.pk, now)
    return state


_ITEM_EVENT = {
    ItemState.DONE: "node.patched",
    ItemState.UNCHANGED: "node.unchanged",
    ItemState.FAILED: "node.failed",
}


def _record_item_event(
    item: MoveItem,
    state: str,
    *,
    message: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> None:
    audit(
        _ITEM_EVENT[state],
        request=item.request,
        node_name=item.node.name,
        message=message,
        before=before,
        after=after,
    )


def _finish_request_if_done(request_id: int, now: datetime) -> None:
    # Two workers finishing the request's last two nodes at once would each count the
    # other's node as still running (its update not yet committed, READ COMMITTED) and
    # neither would end the request: the finishers take turns on the request's row, so the
    # second counts after the first has committed.
    MoveRequest.objects.select_for_update().filter(pk=request_id).exists()
    counts = dict(
        MoveItem.objects.filter(request_id=request_id).values_list("state").annotate(n=Count("id"))
    )
    if any(counts.get(s) for s in (ItemState.PENDING, ItemState.RUNNING)):
        return
    failed = counts.get(ItemState.FAILED, 0)
    ok = counts.get(ItemState.DONE, 0) + counts.get(ItemState.UNCHANGED, 0)
    final = (
        State.FAILED
        if failed and not ok
        else (State.PARTIALLY_FAILED if failed else State.SUCCEEDED)
    )
    if state_transition(request_id, [State.EXECUTING], final, finished_at=now):
        request = MoveRequest.objects.get(pk=request_id)
        observability.move_finished(outcome=final, approved_at=request.decided_at, ended_at=now)
        release_nodes(request)
        audit(
            f"move.{final}", request=request, message=f"{counted(ok, 'node')} done, {failed} failed"
        )
        announce_event_after_commit(request_id, Event.FINISHED)


def sweep(*, now: datetime) -> dict[str, list[int]]:
    """What a dead worker or a lost message left: approved requests never started, and nodes
    whose claim expired. Returns what to enqueue; claiming guards against doing anything
    twice."""
    grace = timedelta(seconds=settings.MOVE_SWEEP_GRACE_SECONDS)
    stale_approved = list(
        MoveRequest.objects.filter(state=State.APPROVED, decided_at__lt=now - grace).values_list(
            "id", flat=True
        )
    )
    items = list(
        MoveItem.objects.filter(request__state=State.EXECUTING)
        .filter(
            Q(state=ItemState.RUNNING, lease_until__lt=now)
            | Q(state=ItemState.PENDING, request__started_at__lt=now - grace)
        )
        .values_list("id", flat=True)
    )
    return {"requests": stale_approved, "items": items}
