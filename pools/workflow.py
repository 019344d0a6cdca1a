"""The move workflow: request, approve, reject, cancel, expire, and loans coming back.

Each transition is one function and one guarded update: a compare-and-swap on the state
(`filter(pk=…, state=old).update(…)`, then the row count), so two approvers racing, a
double click or a retried API call cannot take a request through a step twice.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, F

from pools import selectors
from pools.audit import audit
from pools.core.checks import CheckFailure, NodeFacts, PoolFacts, move_checks
from pools.core.desired import NodeState, Taint, desired_state, node_diff
from pools.models import MoveItem, MoveRequest, Node, Pool
from pools.roles import Capability, has_capability

log = logging.getLogger(__name__)
State = MoveRequest.State


class WorkflowError(Exception):
    """A refused step; `code` is stable for the API, the message is for people."""

    status = 409

    def __init__(self, code: str, message: str, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fields = fields or {}


class MoveRefused(WorkflowError):
    """The checks failed: nothing was created."""

    def __init__(self, failures: Sequence[CheckFailure]) -> None:
        first = failures[0]
        super().__init__(
            first.code,
            " ".join(f.message for f in failures),
            {"checks": [f.as_dict() for f in failures]},
        )
        self.failures = list(failures)


class InvalidMove(WorkflowError):
    status = 400


class NotAllowed(WorkflowError):
    status = 403


# --- what a move would do ---


@dataclass(frozen=True)
class PlannedNode:
    node: Node
    diff: dict[str, Any]
    summary: str
    gpu_pods: list[dict[str, Any]]
    pods: list[dict[str, Any]]


@dataclass(frozen=True)
class MovePlan:
    destination: Pool
    nodes: list[PlannedNode]
    failures: list[CheckFailure]

    @property
    def ok(self) -> bool:
        return not self.failures


def _pool_facts(pools: Sequence[Pool]) -> dict[str, PoolFacts]:
    present = dict(
        Node.objects.present()
        .filter(pool__isnull=False)
        .values_list("pool__name")
        .annotate(n=Count("id"))
    )
    leaving_qs = (
        MoveItem.objects.filter(active=True)
        .exclude(state__in=MoveItem.FINISHED)
        .exclude(source_pool=None)
        .exclude(source_pool_id=F("request__destination_id"))
    )
    leaving = dict(leaving_qs.values_list("source_pool__name").annotate(n=Count("id")))
    return {
        p.name: PoolFacts(
            p.name,
            p.min_nodes,
            tuple(p.accepted_gpu_models),
            p.requires_healthy_nodes,
            present.get(p.name, 0),
            leaving.get(p.name, 0),
        )
        for p in pools
    }


def _node_facts(names: Sequence[str], destination: Pool) -> tuple[list[NodeFacts], dict[str, Node]]:
    rows = {n.name: n for n in Node.objects.present().select_related("pool").filter(name__in=names)}
    holders = dict(
        MoveItem.objects.filter(active=True, node__name__in=names).values_list(
            "node__name", "request_id"
        )
    )
    metrics: Mapping[str, Any] = {}
    available: bool | None = None
    if destination.requires_healthy_nodes:
        result, metrics = selectors.node_metrics()
        available = result.available
    facts = []
    for name in names:
        node = rows.get(name)
        if node is None:
            facts.append(NodeFacts(name, present=False, pool=None))
            continue
        m = metrics.get(name)
        facts.append(
            NodeFacts(
                name,
                present=True,
                pool=node.pool.name if node.pool else None,
                gpu_model=node.gpu_model,
                drifted=node.drifted,
                active_move=holders.get(name),
                xid_gpus=m.xid_gpus if m else None,
                has_metrics=(m is not None) if available else None,
            )
        )
    return facts, rows


def move_plan(
    *,
    node_names: Sequence[str],
    destination: Pool,
    reconcile: bool = False,
    health_override: str = "",
) -> MovePlan:
    """The dry run: the diff each node would get, its pods, and the checks' verdict. Creates
    nothing; the page and the API show it before anything is submitted."""
    facts, rows = _node_facts(node_names, destination)
    pools = list(Pool.objects.active())
    pool_facts = _pool_facts(pools)
    failures = move_checks(
        facts,
        pool_facts.get(destination.name, PoolFacts(destination.name)),
        pool_facts,
        reconcile=reconcile,
        health_override=health_override,
    )
    specs = [p.spec() for p in pools]
    planned = []
    for name in dict.fromkeys(node_names):
        node = rows.get(name)
        if node is None:
            continue
        current = NodeState(node.labels, tuple(Taint.from_api(t) for t in node.taints))
        diff = node_diff(
            current,
            desired_state(
                current.labels,
                current.taints,
                destination.spec(),
                specs,
                pool_key=settings.POOL_LABEL_KEY,
            ),
        )
        pods = sorted(node.pods, key=lambda p: (-p["gpus"], p["namespace"], p["name"]))
        planned.append(
            PlannedNode(node, diff.as_dict(), diff.summary(), [p for p in pods if p["gpus"]], pods)
        )
    return MovePlan(destination, planned, failures)


# --- transitions ---


def _require(user: AbstractBaseUser, capability: Capability, doing: str) -> None:
    if not has_capability(user, capability):
        raise NotAllowed(
            "forbidden", f"You may not {doing}: it needs the {capability.value} permission."
        )


def move_request_create(
    *,
    requested_by: AbstractBaseUser,
    node_names: Sequence[str],
    destination: Pool,
    reason: str,
    drain_policy: str = MoveRequest.DrainPolicy.LEAVE_RUNNING,
    drain_deadline_seconds: int = 1800,
    loan_until: datetime | None = None,
    health_override: str = "",
    reconcile: bool = False,
    now: datetime,
) -> MoveRequest:
    _require(requested_by, Capability.REQUEST_MOVE, "ask for moves")
    fields: dict[str, str] = {}
    if not reason.strip():
        fields["reason"] = "A move needs a reason."
    if not node_names:
        fields["nodes"] = "Choose at least one node."
    if drain_policy not in MoveRequest.DrainPolicy.values:
        fields["drain_policy"] = (
            f"{drain_policy!r} is not a drain policy: use "
            f"{' or '.join(MoveRequest.DrainPolicy.values)}."
        )
    if loan_until is not None and loan_until <= now:
        fields["loan_until"] = "A loan must end in the future."
    if loan_until is not None and reconcile:
        fields["loan_until"] = "A reconcile cannot be a loan."
    if destination.retired_at is not None:
        fields["destination"] = f"Pool {destination.name} is retired."
    if fields:
        raise InvalidMove("validation", " ".join(fields.values()), fields)
    plan = move_plan(
        node_names=node_names,
        destination=destination,
        reconcile=reconcile,
        health_override=health_override,
    )
    if loan_until is not None:
        # A loan must have somewhere to go back to, or it would silently become permanent.
        plan.failures.extend(
            CheckFailure(
                p.node.name,
                "loan_without_pool",
                f"{p.node.name} is in no pool: a loan needs a pool to return it to.",
            )
            for p in plan.nodes
            if p.node.pool is None
        )
    if plan.failures:
        raise MoveRefused(plan.failures)
    try:
        with transaction.atomic():
            request = MoveRequest.objects.create(
                kind=MoveRequest.Kind.RECONCILE if reconcile else MoveRequest.Kind.MOVE,
                requested_by=requested_by,
                destination=destination,
                reason=reason.strip(),
                drain_policy=drain_policy,
                drain_deadline_seconds=drain_deadline_seconds,
                loan_until=loan_until,
                health_override=health_override.strip(),
                approvals_required=max(1, destination.approvals_required),
                expires_at=now + timedelta(hours=settings.MOVE_PENDING_HOURS),
            )
            MoveItem.objects.bulk_create(
                [
                    MoveItem(
                        request=request,
                        node=p.node,
                        source_pool=p.node.pool,
                        source_label=p.node.pool_label,
                        planned_diff=p.diff,
                        gpu_pods=p.gpu_pods,
                    )
                    for p in plan.nodes
                ]
            )
            audit(
                "move.requested",
                actor=requested_by,
                request=request,
                message=f"{len(plan.nodes)} node(s) to {destination.name}: {request.reason}"
                + (
                    f" (health override: {request.health_override})"
                    if request.health_override
                    else ""
                ),
            )
    except IntegrityError:
        # The database's one-active-move-per-node constraint: someone was faster.
        facts, _ = _node_facts(node_names, destination)
        raise MoveRefused(
            [
                CheckFailure(
                    f.name,
                    "active_move",
                    f"{f.name} already has an active move (#{f.active_move}): one at a time.",
                )
                for f in facts
                if f.active_move is not None
            ]
            or [CheckFailure(None, "active_move", "A node already has an active move.")]
        ) from None
    return request


def state_transition(request_id: int, from_states: Sequence[str], to: str, **changes: Any) -> bool:
    """Compare-and-swap on the request's state; True when this call made the step."""
    return bool(
        MoveRequest.objects.filter(pk=request_id, state__in=from_states).update(state=to, **changes)
    )


def _refuse_state(request: MoveRequest, doing: str) -> WorkflowError:
    request.refresh_from_db(fields=["state"])
    return WorkflowError(
        "state_conflict",
        f"Cannot {doing} move #{request.pk}: it is {request.get_state_display().lower()}.",
    )


def release_nodes(request: MoveRequest) -> None:
    MoveItem.objects.filter(request=request, active=True).update(active=False)


def _enqueue_execution(request_id: int) -> None:
    """After commit. If the broker is down the approval still stands; the sweep starts it."""
    from pools import tasks

    def send() -> None:
        try:
            tasks.execute_move.delay(request_id)
        except Exception:
            log.exception("could not enqueue move #%s; the sweep will start it", request_id)

    transaction.on_commit(send)


def move_approve(
    *, request: MoveRequest, approver: AbstractBaseUser, comment: str = "", now: datetime
) -> MoveRequest:
    _require(approver, Capability.APPROVE_MOVE, "approve moves")
    if request.requested_by_id == approver.pk:
        raise NotAllowed("self_approval", "Four eyes: you cannot approve your own request.")
    with transaction.atomic():
        locked = MoveRequest.objects.select_for_update().get(pk=request.pk)
        if locked.state != State.PENDING:
            raise _refuse_state(locked, "approve")
        if locked.approvals.filter(approver=approver).exists():
            raise WorkflowError(
                "already_approved",
                f"You have approved move #{locked.pk} already; it needs someone else.",
            )
        locked.approvals.create(approver=approver, comment=comment)
        count = locked.approvals.count()
        audit(
            "move.approved",
            actor=approver,
            request=locked,
            message=f"approval {count} of {locked.approvals_required}"
            + (f": {comment}" if comment else ""),
        )
        if count >= locked.approvals_required and state_transition(
            locked.pk, [State.PENDING], State.APPROVED, decided_at=now
        ):
            audit("move.fully_approved", request=locked, message="execution queued")
            _enqueue_execution(locked.pk)
    locked.refresh_from_db()
    return locked


def move_reject(
    *, request: MoveRequest, approver: AbstractBaseUser, reason: str, now: datetime
) -> MoveRequest:
    _require(approver, Capability.APPROVE_MOVE, "reject moves")
    if not reason.strip():
        raise InvalidMove(
            "validation", "Say why the move is rejected.", {"reason": "A rejection needs a reason."}
        )
    with transaction.atomic():
        if not state_transition(
            request.pk, [State.PENDING], State.REJECTED, decided_at=now, finished_at=now
        ):
            raise _refuse_state(request, "reject")
        release_nodes(request)
        audit("move.rejected", actor=approver, request=request, message=reason.strip())
    request.refresh_from_db()
    return request


def move_cancel(*, request: MoveRequest, user: AbstractBaseUser, now: datetime) -> MoveRequest:
    own = request.requested_by_id == user.pk
    if not (own and has_capability(user, Capability.REQUEST_MOVE)) and not has_capability(
        user, Capability.EDIT_POOLS
    ):
        raise NotAllowed("forbidden", "Only the requester (or a pool admin) can cancel a move.")
    with transaction.atomic():
        if not state_transition(request.pk, [State.PENDING], State.CANCELLED, finished_at=now):
            raise _refuse_state(request, "cancel")
        release_nodes(request)
        audit("move.cancelled", actor=user, request=request)
    request.refresh_from_db()
    return request


def moves_expire(*, now: datetime) -> int:
    expired = 0
    for request in MoveRequest.objects.filter(state=State.PENDING, expires_at__lte=now):
        with transaction.atomic():
            if state_transition(request.pk, [State.PENDING], State.EXPIRED, finished_at=now):
                release_nodes(request)
                audit(
                    "move.expired",
                    request=request,
                    message=f"no decision within {settings.MOVE_PENDING_HOURS} h",
                )
                expired += 1
    return expired


# --- loans ---


def loans_return_due(*, now: datetime) -> list[MoveRequest]:
    """Loans whose time is up go back to their source pools: a system move per source pool,
    under the original approval (no new approval: the window was approved)."""
    returns: list[MoveRequest] = []
    due = MoveRequest.objects.filter(
        loan_until__lte=now,
        loan_returned_at__isnull=True,
        state__in=[State.SUCCEEDED, State.PARTIALLY_FAILED],
    )
    for loan in due:
        with transaction.atomic():
            if not MoveRequest.objects.filter(pk=loan.pk, loan_returned_at__isnull=True).update(
                loan_returned_at=now
            ):
                continue  # another beat got there first
            moved = list(
                loan.items.filter(
                    state__in=[MoveItem.State.DONE, MoveItem.State.UNCHANGED],
                    source_pool__isnull=False,
                ).select_related("node", "source_pool")
            )
            # A node that another move holds now cannot be returned under this one: say so
            # on the record instead of failing the whole return (the one-active-move rule).
            holders = dict(
                MoveItem.objects.filter(active=True, node__in=[i.node for i in moved]).values_list(
                    "node__name", "request_id"
                )
            )
            for item in moved:
                if item.node.name in holders:
                    audit(
                        "loan.return_blocked",
                        request=loan,
                        node_name=item.node.name,
                        message=f"move #{holders[item.node.name]} holds the node; it does "
                        f"not return to {item.source_pool.name} by itself",
                    )
            moved = [item for item in moved if item.node.name not in holders]
            by_pool: dict[int, list[MoveItem]] = {}
            for item in moved:
                by_pool.setdefault(item.source_pool_id, []).append(item)  # type: ignore[arg-type]
            for items in by_pool.values():
                back = MoveRequest.objects.create(
                    kind=MoveRequest.Kind.LOAN_RETURN,
                    state=State.APPROVED,
                    requested_by=None,
                    destination=items[0].source_pool,
                    parent=loan,
                    reason=f"loan from move #{loan.pk} ended",
                    decided_at=now,
                    drain_policy=loan.drain_policy,
                    drain_deadline_seconds=loan.drain_deadline_seconds,
                    approvals_required=0,
                )
                MoveItem.objects.bulk_create(
                    [
                        MoveItem(
                            request=back,
                            node=item.node,
                            source_pool=loan.destination,
                            source_label=loan.destination.name,
                            planned_diff={},
                        )
                        for item in items
                    ]
                )
                audit(
                    "loan.returning",
                    request=back,
                    message=f"{len(items)} node(s) back to {back.destination.name} "
                    f"(loan of move #{loan.pk} ended)",
                )
                _enqueue_execution(back.pk)
                returns.append(back)
    return returns


def loan_change(
    *,
    loan: MoveRequest,
    approver: AbstractBaseUser,
    until: datetime | None,
    reason: str,
    now: datetime,
) -> MoveRequest:
    """End a loan early (until=None) or extend it: an approval decision, never the
    requester's alone (the articles: sharing must not silently become permanent)."""
    _require(approver, Capability.APPROVE_MOVE, "change loans")
    if loan.requested_by_id == approver.pk:
        raise NotAllowed("self_approval", "Four eyes: you cannot change your own loan.")
    if not reason.strip():
        raise InvalidMove(
            "validation", "Say why the loan changes.", {"reason": "A loan change needs a reason."}
        )
    new_end = now if until is None else until
    if until is not None and until <= now:
        raise InvalidMove(
            "validation",
            "A loan can only be extended into the future.",
            {"loan_until": "Must be in the future."},
        )
    with transaction.atomic():
        changed = MoveRequest.objects.filter(
            pk=loan.pk,
            loan_until__isnull=False,
            loan_returned_at__isnull=True,
            state__in=[
                State.SUCCEEDED,
                State.PARTIALLY_FAILED,
                State.APPROVED,
                State.EXECUTING,
                State.PENDING,
            ],
        ).update(loan_until=new_end)
        if not changed:
            raise WorkflowError("state_conflict", f"Move #{loan.pk} is not an open loan.")
        audit(
            "loan.ended_early" if until is None else "loan.extended",
            actor=approver,
            request=loan,
            message=f"{reason.strip()} (until {new_end:%Y-%m-%d %H:%M} UTC)",
            before={"loan_until": loan.loan_until.isoformat() if loan.loan_until else None},
            after={"loan_until": new_end.isoformat()},
        )
    loan.refresh_from_db()
    return loan


def active_loans() -> list[MoveRequest]:
    return list(
        MoveRequest.objects.filter(loan_until__isnull=False, loan_returned_at__isnull=True)
        .exclude(state__in=[State.REJECTED, State.CANCELLED, State.EXPIRED, State.FAILED])
        .select_related("destination", "requested_by")
        .annotate(nodes=Count("items"))
        .order_by("loan_until")
    )


def drifted_node_names(pool: Pool) -> list[str]:
    return list(
        Node.objects.present()
        .filter(pool=pool, drifted=True)
        .exclude(move_items__active=True)
        .values_list("name", flat=True)
    )
