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
from pools.core.checks import CheckFailure
from pools.core.notices import Event
from pools.errors import InvalidMove, MoveRefused
from pools.events import announce_event_after_commit
from pools.models import MoveItem, MoveRequest, Pool
from pools.roles import Capability
from pools.workflow.plan import MovePlan, move_plan, node_facts
from pools.workflow.rules import require_capability


def _input_problems(
    *,
    node_names: Sequence[str],
    destination: Pool,
    reason: str,
    drain_policy: str,
    loan_until: datetime | None,
    reconcile: bool,
    now: datetime,
) -> dict[str, str]:
    """What is wrong with the request itself, by field."""
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
    return fields


def _loan_failures(plan: MovePlan) -> list[CheckFailure]:
    # A loan must have somewhere to go back to, or it would silently become permanent.
    return [
        CheckFailure(
            p.node.name,
            "loan_without_pool",
            f"{p.node.name} is in no pool: a loan needs a pool to return it to.",
        )
        for p in plan.nodes
        if p.node.pool is None
    ]


def _create(fields: dict[str, Any], plan: MovePlan) -> MoveRequest:
    request = MoveRequest.objects.create(**fields)
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
    override = f" (health override: {request.health_override})" if request.health_override else ""
    audit(
        "move.requested",
        actor=request.requested_by,
        request=request,
        message=f"{len(plan.nodes)} node(s) to {plan.destination.name}: {request.reason}{override}",
    )
    return request


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
    """Ask to move `node_names` to `destination`: InvalidMove names the bad fields,
    MoveRefused lists the failed checks, and either way nothing is created."""
    require_capability(requested_by, Capability.REQUEST_MOVE, "ask for moves")
    if problems := _input_problems(
        node_names=node_names,
        destination=destination,
        reason=reason,
        drain_policy=drain_policy,
        loan_until=loan_until,
        reconcile=reconcile,
        now=now,
    ):
        raise InvalidMove("validation", " ".join(problems.values()), problems)
    plan = move_plan(
        node_names=node_names,
        destination=destination,
        reconcile=reconcile,
        health_override=health_override,
    )
    failures = plan.failures + (_loan_failures(plan) if loan_until is not None else [])
    if failures:
        raise MoveRefused(failures)
    fields = {
        "kind": MoveRequest.Kind.RECONCILE if reconcile else MoveRequest.Kind.MOVE,
        "requested_by": requested_by,
        "destination": destination,
        "reason": reason.strip(),
        "drain_policy": drain_policy,
        "drain_deadline_seconds": drain_deadline_seconds,
        "loan_until": loan_until,
        "health_override": health_override.strip(),
        "approvals_required": max(1, destination.approvals_required),
        "expires_at": now + timedelta(hours=settings.MOVE_PENDING_HOURS),
    }
    try:
        with transaction.atomic():
            move = _create(fields, plan)
            announce_event_after_commit(move.pk, Event.REQUESTED)
            return move
    except IntegrityError:
        raise _taken(node_names, destination) from None
