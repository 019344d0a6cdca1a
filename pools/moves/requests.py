"""Asking for a move: validated, checked, then created in one transaction, or refused with
nothing created."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from pools.audit import audit
from pools.common.errors import InvalidMove, MoveRefused
from pools.common.events import announce_event_after_commit, announce_execution_after_commit
from pools.common.roles import Capability
from pools.core.checks import CheckFailure
from pools.core.notices import Event
from pools.core.wording import counted
from pools.fleet.targets import pool_target
from pools.models import MoveItem, MoveRequest, Node, Pool
from pools.moves.plan import MoveAsk, MovePlan, move_plan, node_facts, target_spec
from pools.moves.rules import require_capability


def _create(fields: dict[str, Any], plan: MovePlan, ask: MoveAsk) -> MoveRequest:
    request = MoveRequest.objects.create(**fields)
    # What the approvers see is what runs: the target is fixed now, with the planned diff.
    target = pool_target(target_spec(ask))
    MoveItem.objects.bulk_create(
        [
            MoveItem(
                request=request,
                node=p.node,
                source_pool=p.node.pool,
                source_label=p.node.pool_label,
                planned_diff=p.diff,
                gpu_pods=p.gpu_pods,
                **MoveItem.approved(p.node, target),
            )
            for p in plan.nodes
        ]
    )
    override = f" (health override: {request.health_override})" if request.health_override else ""
    audit(
        "move.requested",
        actor=request.requested_by,
        request=request,
        message=_requested(request, plan) + f": {request.reason}{override}",
    )
    return request


def _requested(request: MoveRequest, plan: MovePlan) -> str:
    nodes = counted(len(plan.nodes), "node")
    if request.kind == MoveRequest.Kind.RECONFIGURE and request.plugin_config:
        return (
            f"{nodes} to device plugin configuration {request.plugin_config} in "
            f"{plan.destination.name}"
        )
    if request.kind == MoveRequest.Kind.RECONFIGURE:
        return f"{nodes} to MIG configuration {request.mig_config} in {plan.destination.name}"
    return f"{nodes} to {plan.destination.name}"


def _kind(ask: MoveAsk) -> str:
    if ask.mig_config or ask.plugin_config:
        return MoveRequest.Kind.RECONFIGURE
    return MoveRequest.Kind.RECONCILE if ask.reconcile else MoveRequest.Kind.MOVE


def _taken(node_names: Sequence[str], destination: Pool) -> MoveRefused:
    """The refusal when the one-active-move-per-node constraint stopped the insert: another
    request took a node between our checks and our write."""
    facts, _ = node_facts(node_names, destination)
    return MoveRefused(
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
    )


def move_request_ask(*, requested_by: AbstractBaseUser, ask: MoveAsk, now: datetime) -> MoveRequest:
    """Ask for the move `ask` describes: InvalidMove names the bad fields, MoveRefused lists
    the failed checks, and either way nothing is created. The checks are the dry run's
    (moves.plan.move_plan, on the same MoveAsk): what it passes, this accepts."""
    require_capability(requested_by, Capability.REQUEST_MOVE, "ask for moves")
    plan = move_plan(ask=ask, now=now)
    if problems := plan.field_errors:
        raise InvalidMove("validation", " ".join(problems.values()), problems)
    if plan.failures:
        raise MoveRefused(plan.failures)
    destination = ask.destination
    fields = {
        "kind": _kind(ask),
        "mig_config": ask.mig_config,
        "plugin_config": ask.plugin_config,
        "requested_by": requested_by,
        "destination": destination,
        "reason": ask.reason.strip(),
        "drain_policy": ask.drain_policy,
        "drain_deadline_seconds": ask.drain_deadline_seconds,
        "loan_until": ask.loan_until,
        "health_override": ask.health_override.strip(),
        "approvals_required": max(1, destination.approvals_required),
        "expires_at": now + timedelta(hours=settings.MOVE_PENDING_HOURS),
    }
    try:
        with transaction.atomic():
            move = _create(fields, plan, ask)
            announce_event_after_commit(move.pk, Event.REQUESTED)
            return move
    except IntegrityError:
        raise _taken(ask.node_names, destination) from None


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
    """move_request_ask with the ask spelled out, for commands and scripts."""
    ask = MoveAsk(
        node_names=node_names,
        destination=destination,
        reason=reason,
        drain_policy=drain_policy,
        drain_deadline_seconds=drain_deadline_seconds,
        loan_until=loan_until,
        health_override=health_override,
        reconcile=reconcile,
    )
    return move_request_ask(requested_by=requested_by, ask=ask, now=now)


def reconfiguration_ask(
    *,
    requested_by: AbstractBaseUser,
    node_names: Sequence[str],
    mig_config: str = "",
    plugin_config: str = "",
    reason: str,
    drain_deadline_seconds: int = 1800,
    now: datetime,
) -> MoveRequest:
    """Ask for nodes of one pool to take MIG configuration `mig_config`, or device plugin
    configuration `plugin_config` (how their GPUs are shared): a request of its own kind,
    approved like a move, run drain-first (the MIG manager repartitions only GPUs no pod
    uses; a new sharing changes what the GPUs' pods were promised). InvalidMove names a bad
    field (an unknown configuration, one the GPUs cannot take, a node without MIG, both or
    neither asked); MoveRefused lists the other failed checks."""
    if bool(mig_config.strip()) == bool(plugin_config.strip()):
        message = "Ask for either a MIG configuration or a device plugin configuration."
        raise InvalidMove("validation", message, {"mig_config": message, "plugin_config": message})
    pools = set(
        Node.objects.present().filter(name__in=node_names).values_list("pool__name", flat=True)
    )
    if len(pools) != 1 or None in pools:
        raise InvalidMove(
            "validation",
            "A reconfiguration takes nodes of one pool, each in a pool.",
            {"nodes": "A reconfiguration takes nodes of one pool, each in a pool."},
        )
    ask = MoveAsk(
        node_names=node_names,
        destination=Pool.objects.get(name=pools.pop()),
        reason=reason,
        drain_policy=MoveRequest.DrainPolicy.DRAIN_FIRST,
        drain_deadline_seconds=drain_deadline_seconds,
        mig_config=mig_config.strip(),
        plugin_config=plugin_config.strip(),
    )
    return move_request_ask(requested_by=requested_by, ask=ask, now=now)


def booked_loan_create(
    *,
    requested_by: AbstractBaseUser,
    node_names: Sequence[str],
    destination: Pool,
    reason: str,
    loan_until: datetime,
    approvers: Sequence[tuple[AbstractBaseUser, str]],
    now: datetime,
) -> MoveRequest:
    """A booking's loan at its start: the same checks as any move now (MoveRefused lists
    what fails, and nothing is created), then created approved already, with the booking's
    approvals (its window was approved with four eyes), and announced for execution."""
    ask = MoveAsk(
        node_names=node_names, destination=destination, reason=reason, loan_until=loan_until
    )
    plan = move_plan(ask=ask, now=now)
    if plan.failures:
        raise MoveRefused(plan.failures)
    fields = {
        "kind": MoveRequest.Kind.MOVE,
        "state": MoveRequest.State.APPROVED,
        "requested_by": requested_by,
        "destination": destination,
        "reason": reason,
        "loan_until": loan_until,
        "approvals_required": len(approvers),
        "decided_at": now,
    }
    try:
        with transaction.atomic():
            move = _create(fields, plan, ask)
            for approver, comment in approvers:
                move.approvals.create(approver=approver, comment=comment)
            audit("move.fully_approved", request=move, message="approved through its booking")
            announce_execution_after_commit(move.pk)
            return move
    except IntegrityError:
        raise _taken(node_names, destination) from None
