"""Applying an approved move: nodes claimed in chunks, applied in parallel, recorded in bulk.

Nothing here trusts the message queue to remember anything: the database holds each node's
progress, a worker claims its nodes with a lease (one compare-and-swap per node, all in one
transaction), and the sweep re-enqueues what a dead worker left. The Kubernetes side of each
node (pools/moves/execution/outcome.py) runs in a bounded pool of threads, each node with its one
PATCH guarded by resourceVersion (a 409 re-reads); the outcomes are then recorded in one
transaction: the inventory rows, each item (compare-and-swap on its claim), the audit
events, and the request's end. A drain-first node runs alone in its task, in the worker's
own thread, renewing its lease on every poll.

A node that already carries the approved state is recorded as unchanged without a PATCH,
or, when an earlier attempt of this move claimed it, as applied (confirmed on resume).
Transient Kubernetes errors put the node back to wait, retried with backoff until the
move's execution deadline; only the deadline or a permanent error fails it.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from pools.audit import audit
from pools.common import log_context, observability
from pools.common.errors import (
    NodeNotMoved,
    ReconfigurationFailed,
)
from pools.common.events import announce_event_after_commit
from pools.core.checks import NodeFacts, PoolFacts, capacity_floor
from pools.core.desired import Target
from pools.core.notices import Event
from pools.core.wording import counted
from pools.fleet.targets import active_pool_specs, pool_target
from pools.inventory import inventory_refresh_nodes
from pools.kube.errors import KubeError
from pools.kube.nodes import read_nodes
from pools.kube.retry import RetryPolicy
from pools.models import AuditEvent, MoveItem, MoveRequest, Node
from pools.moves.execution.drain import ItemLeaseLost, drain_hooks, uncordon_after_failure
from pools.moves.execution.outcome import FAILED, NodeWork, Outcome, node_outcome
from pools.moves.execution.writes import (
    Closing,
    claim_items,
    close_items,
    closing_rows,
    event_rows,
    insert_event_rows,
)
from pools.moves.transitions import release_nodes, state_transition

log = logging.getLogger(__name__)
State = MoveRequest.State
ItemState = MoveItem.State
# Nodes a task takes at once: enough to keep the thread pool busy, few enough that the
# chunk's lease (MOVE_LEASE_SECONDS) covers its run with room to spare.
CHUNK_SIZE = 50
Result = Outcome | Exception


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


def chunks(request_id: int, item_ids: Sequence[int]) -> list[list[int]]:
    """The tasks a request's items are split into: one node a task when it drains first
    (a drain takes minutes, and the lease is renewed for one node), else CHUNK_SIZE."""
    drain_first = MoveRequest.objects.filter(
        pk=request_id, drain_policy=MoveRequest.DrainPolicy.DRAIN_FIRST
    ).exists()
    size = 1 if drain_first else CHUNK_SIZE
    return [list(item_ids[i : i + size]) for i in range(0, len(item_ids), size)]


def retry_delay(attempt: int) -> float:
    """How long a node waiting for the Kubernetes API waits before its next attempt: the one
    retry policy's capped, jittered backoff."""
    return RetryPolicy().delay(attempt, None)


# What running a node reads of its item, request, node and source pool: not the node's
# inventory (its pods, labels, figures) nor the item's other records, whose decoding cost
# more than the claim itself. Anything else is still read when asked for.
CLAIMED_FIELDS = (
    *("source_label", "planned_before", "planned_diff", "desired", "attempts"),
    *("cordoned_by_portal", "request_id", "source_pool_id"),
    *("request__kind", "request__destination_id", "request__drain_policy"),
    *("request__drain_deadline_seconds", "request__started_at"),
    *("node__name", "source_pool__name", "source_pool__min_nodes"),
)


def _claim_many(item_ids: Sequence[int], now: datetime) -> list[MoveItem]:
    lease = now + timedelta(seconds=settings.MOVE_LEASE_SECONDS)
    claimed = claim_items(item_ids, now=now, lease=lease)
    return list(
        MoveItem.objects.select_related("request", "node", "source_pool")
        .only(*CLAIMED_FIELDS)
        .filter(pk__in=claimed)
        .order_by("pk")
    )


def _claim(item_id: int, now: datetime) -> MoveItem | None:
    items = _claim_many([item_id], now)
    return items[0] if items else None


def _capacity_failures(items: Sequence[MoveItem]) -> dict[int, str]:
    """Per source pool, why taking nodes out of it now would break its floor. Every node
    still on its way out counts (this chunk's too), as the request's check counted them."""
    sources = {
        i.source_pool_id: i.source_pool
        for i in items
        if i.source_pool is not None
        and i.request.kind != MoveRequest.Kind.RECONCILE
        and i.source_pool_id != i.request.destination_id
    }
    if not sources:
        return {}
    present = dict(
        Node.objects.present()
        .filter(pool_id__in=sources)
        .values_list("pool_id")
        .annotate(n=Count("id"))
    )
    leaving = dict(
        MoveItem.objects.filter(active=True, source_pool_id__in=sources)
        .exclude(state__in=MoveItem.FINISHED)
        .exclude(request__destination_id=F("source_pool_id"))
        .values_list("source_pool_id")
        .annotate(n=Count("id"))
    )
    failures = {}
    for pool_id, pool in sources.items():
        facts = PoolFacts(
            pool.name,
            pool.min_nodes,
            present_nodes=present.get(pool_id, 0),
            leaving=max(0, leaving.get(pool_id, 0) - 1),  # the node itself is counted below
        )
        found = capacity_floor([NodeFacts("", True, pool.name)], PoolFacts(""), {pool.name: facts})
        if found:
            failures[pool_id] = found[0].message
    return failures


def _target(item: MoveItem, specs: Sequence[Any]) -> Target:
    if item.desired:
        return Target.from_dict(item.desired)
    # Approved before targets were stored with the items: today's definitions.
    return pool_target(item.request.destination.spec(), specs)


def _work(item: MoveItem, specs: Sequence[Any], capacity: dict[int, str]) -> NodeWork:
    return NodeWork(
        item_id=item.pk,
        node=item.node.name,
        source_label=item.source_label,
        target=_target(item, specs),
        drain_first=item.request.drain_policy == MoveRequest.DrainPolicy.DRAIN_FIRST,
        planned_before=item.planned_before,
        planned_diff=item.planned_diff,
        resumed=item.attempts > 1,
        cordoned_by_portal=item.cordoned_by_portal,
        capacity_failure=capacity.get(item.source_pool_id or 0),
    )


def _attempt(work: NodeWork) -> Result:
    try:
        return node_outcome(work)
    except (NodeNotMoved, KubeError) as exc:
        return exc


def _attempt_drain_first(item: MoveItem, work: NodeWork) -> Result:
    hooks, cordon = drain_hooks(item)
    try:
        outcome = node_outcome(work, hooks)
        outcome.later = cordon.later
        return outcome
    except ItemLeaseLost as exc:
        return exc  # another worker holds the node now: leave it (and its cordon) alone
    except ReconfigurationFailed as exc:
        return exc  # relabelled, not repartitioned: it stays cordoned for an operator
    except (NodeNotMoved, KubeError) as exc:
        uncordon_after_failure(item, cordon.on)
        return exc


def _run(items: Sequence[MoveItem], works: dict[int, NodeWork]) -> dict[int, Result]:
    results: dict[int, Result] = {}
    parallel = []
    for item in items:
        if works[item.pk].drain_first:
            results[item.pk] = _attempt_drain_first(item, works[item.pk])
        else:
            parallel.append(works[item.pk])
    if len(parallel) == 1:
        results[parallel[0].item_id] = _attempt(parallel[0])
    elif parallel:
        with ThreadPoolExecutor(max_workers=settings.MOVE_PARALLEL_NODES) as pool:
            # Each thread runs in a copy of this context: its log lines name the move too.
            futures = {
                w.item_id: pool.submit(contextvars.copy_context().run, _attempt, w)
                for w in parallel
            }
            results.update({item_id: f.result() for item_id, f in futures.items()})
    return results


def execute_items(item_ids: Sequence[int]) -> list[int]:
    """Run these nodes (those another worker holds are left alone). Returns the ids that
    wait for the Kubernetes API, for the task to try again after a backoff."""
    items = _claim_many(item_ids, timezone.now())
    if not items:
        return []
    log_context.bind(move_id=items[0].request_id)
    specs = active_pool_specs()
    capacity = _capacity_failures(items)
    works = {item.pk: _work(item, specs, capacity) for item in items}
    return _record(items, _run(items, _prefetched(works)), now=timezone.now())


def _prefetched(works: dict[int, NodeWork]) -> dict[int, NodeWork]:
    """The chunk's nodes read in one LIST rather than a GET each (drain-first nodes read
    theirs after their turn comes). Each PATCH is still guarded by the resourceVersion the
    LIST gave, and a node the LIST missed, or a failed LIST, is read alone."""
    names = [w.node for w in works.values() if not w.drain_first]
    if len(names) < 2:
        return works
    try:
        listed = read_nodes(names)
    except KubeError as exc:
        log.warning("listing the chunk's nodes failed, reading them one by one: %s", exc)
        return works
    return {i: replace(w, raw=listed.get(w.node)) for i, w in works.items()}


def execute_item(item_id: int) -> str | None:
    """Run one node; its state afterwards, or None when another worker holds it."""
    if not _claimable(item_id):
        return None
    execute_items([item_id])
    return MoveItem.objects.get(pk=item_id).state


def _claimable(item_id: int) -> bool:
    now = timezone.now()
    return MoveItem.objects.filter(
        Q(state=ItemState.PENDING) | Q(state=ItemState.RUNNING, lease_until__lt=now),
        pk=item_id,
        request__state=State.EXECUTING,
    ).exists()


def _deadline(item: MoveItem, now: datetime) -> datetime:
    started = item.request.started_at or now
    return started + timedelta(seconds=settings.MOVE_EXECUTION_DEADLINE_SECONDS)


def _failed(item: MoveItem, exc: Exception) -> Outcome:
    if isinstance(exc, KubeError) and exc.transient:
        deadline = settings.MOVE_EXECUTION_DEADLINE_SECONDS
        return Outcome(
            FAILED,
            f"the Kubernetes API stayed unavailable past the move's execution deadline "
            f"({deadline} s): {exc}",
        )
    return Outcome(FAILED, str(exc))


def _mine(item: MoveItem) -> Any:
    """The item as this worker claimed it: a claim since (lease expired) makes it another's."""
    return MoveItem.objects.filter(pk=item.pk, state=ItemState.RUNNING, attempts=item.attempts)


def _to_waiting(item: MoveItem, exc: Exception) -> AuditEvent | None:
    waiting = f"waiting for the Kubernetes API (attempt {item.attempts})"
    if not _mine(item).update(state=ItemState.PENDING, lease_until=None, waiting=waiting):
        return None
    return AuditEvent(
        action="node.retrying",
        actor_name="system",
        request=item.request,
        node_name=item.node.name,
        message=f"{waiting}: {exc}",
    )


def _event(item: MoveItem, action: str, message: str = "") -> AuditEvent:
    return AuditEvent(
        action=action,
        actor_name="system",
        request=item.request,
        node_name=item.node.name,
        message=message,
    )


def _closed_values(outcome: Outcome, now: datetime) -> dict[str, Any]:
    return {
        "state": outcome.state,
        "finished_at": now,
        "lease_until": None,
        "waiting": "",
        "error": outcome.message if outcome.state == ItemState.FAILED else "",
        "before": outcome.before,
        "after": outcome.after,
        "applied_diff": outcome.applied,
    }


def _closed_events(item: MoveItem, outcome: Outcome) -> list[AuditEvent]:
    action = {ItemState.DONE: "node.patched", ItemState.UNCHANGED: "node.unchanged"}
    closed = AuditEvent(
        action=action.get(outcome.state, "node.failed"),
        actor_name="system",
        request=item.request,
        node_name=item.node.name,
        message=outcome.message,
        before=outcome.before,
        after=outcome.after,
    )
    return [closed, *(_event(item, action) for action in outcome.later)]


def _sort_results(
    items: Sequence[MoveItem], results: dict[int, Result], now: datetime
) -> tuple[list[tuple[MoveItem, Exception]], list[tuple[MoveItem, Outcome]]]:
    """The nodes to put back to wait for the Kubernetes API, and those that end (a lost
    lease is another worker's node now: neither)."""
    waiting: list[tuple[MoveItem, Exception]] = []
    closing: list[tuple[MoveItem, Outcome]] = []
    for item in items:
        result = results[item.pk]
        if isinstance(result, ItemLeaseLost):
            continue
        if isinstance(result, KubeError) and result.transient and now < _deadline(item, now):
            waiting.append((item, result))
            continue
        closing.append((item, result if isinstance(result, Outcome) else _failed(item, result)))
    return waiting, closing


def _record(items: Sequence[MoveItem], results: dict[int, Result], *, now: datetime) -> list[int]:
    """The outcomes in one transaction: first the inventory (whoever sees a move finished
    sees its nodes where they now are), then the items, their audit events, the requests.
    What the items and their events will say is encoded before it: the transaction holds
    the database's write lock (SQLite: the whole file), which another worker's claim waits
    for."""
    to_wait, closing = _sort_results(items, results, now)
    closings = [Closing(item.pk, item.attempts, _closed_values(o, now)) for item, o in closing]
    prepared, at = closing_rows(closings), timezone.now()
    closed_events = {item.pk: event_rows(_closed_events(item, o), at=at) for item, o in closing}
    waiting: list[int] = []
    events: list[AuditEvent] = []
    with transaction.atomic():
        inventory_refresh_nodes(
            [r.raw for r in results.values() if isinstance(r, Outcome) and r.raw is not None]
        )
        for item, exc in to_wait:
            if event := _to_waiting(item, exc):
                waiting.append(item.pk)
                events.append(event)
        # Those claimed since by another worker are its record, not ours: their events too.
        recorded = close_items(closings, prepared)
        rows = event_rows(events, at=at)
        rows += [
            row for item, _ in closing if item.pk in recorded for row in closed_events[item.pk]
        ]
        insert_event_rows(rows)
        for request_id in sorted({item.request_id for item in items}):
            _finish_request_if_done(request_id, now)
    return waiting


def _finish(item: MoveItem, state: str, *, message: str, **recorded: Any) -> str:
    """Record one claimed node's end (`recorded`: before, after, raw, applied)."""
    _record([item], {item.pk: Outcome(state, message, **recorded)}, now=timezone.now())
    return MoveItem.objects.get(pk=item.pk).state


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
