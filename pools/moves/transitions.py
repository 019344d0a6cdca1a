"""The request's own steps: approve, reject, cancel, expire.

Each step is one guarded update: a compare-and-swap on the state
(`filter(pk=…, state__in=…).update(…)`, then the row count), so two approvers racing, a
double click or a retried API call cannot take a request through a step twice. Who may take
a step is asked of pools.moves.rules first.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from pools.audit import audit
from pools.common.errors import InvalidMove, Refused
from pools.common.events import announce_event_after_commit, announce_execution_after_commit
from pools.core.notices import Event
from pools.models import MoveItem, MoveRequest
from pools.moves.rules import FROM_STATES, Action, require_allowed

State = MoveRequest.State


def state_transition(request_id: int, from_states: Sequence[str], to: str, **changes: Any) -> bool:
    """Compare-and-swap on the request's state; True when this call made the step."""
    return bool(
        MoveRequest.objects.filter(pk=request_id, state__in=from_states).update(state=to, **changes)
    )


def refuse_state(request: MoveRequest, doing: str) -> Refused:
    request.refresh_from_db(fields=["state"])
    return Refused(
        "state_conflict",
        f"Cannot {doing} move #{request.pk}: it is {request.get_state_display().lower()}.",
    )


def release_nodes(request: MoveRequest) -> None:
    """The request no longer holds its nodes: another move may take them."""
    MoveItem.objects.filter(request=request, active=True).update(active=False)


def move_approve(
    *, request: MoveRequest, approver: AbstractBaseUser, reason: str = "", now: datetime
) -> MoveRequest:
    """One approval; the last one needed approves the request and, after commit, asks for
    its execution."""
    require_allowed(approver, request, Action.APPROVE)
    with transaction.atomic():
        # Locked: the approvals are counted and compared with the number needed.
        locked = MoveRequest.objects.select_for_update().get(pk=request.pk)
        if locked.state not in FROM_STATES[Action.APPROVE]:
            raise refuse_state(locked, "approve")
        if locked.approvals.filter(approver=approver).exists():
            raise Refused(
                "already_approved",
                f"You have approved move #{locked.pk} already; it needs someone else.",
            )
        reason = reason.strip()
        locked.approvals.create(approver=approver, comment=reason)
        count = locked.approvals.count()
        audit(
            "move.approved",
            actor=approver,
            request=locked,
            message=f"approval {count} of {locked.approvals_required}"
            + (f": {reason}" if reason else ""),
        )
        if count >= locked.approvals_required and state_transition(
            locked.pk, FROM_STATES[Action.APPROVE], State.APPROVED, decided_at=now
        ):
            audit("move.fully_approved", request=locked, message="execution queued")
            announce_execution_after_commit(locked.pk)
            announce_event_after_commit(locked.pk, Event.APPROVED)
    locked.refresh_from_db()
    return locked


def move_reject(
    *, request: MoveRequest, approver: AbstractBaseUser, reason: str, now: datetime
) -> MoveRequest:
    require_allowed(approver, request, Action.REJECT)
    if not reason.strip():
        raise InvalidMove(
            "validation", "Say why the move is rejected.", {"reason": "A rejection needs a reason."}
        )
    with transaction.atomic():
        if not state_transition(
            request.pk, FROM_STATES[Action.REJECT], State.REJECTED, decided_at=now, finished_at=now
        ):
            raise refuse_state(request, "reject")
        release_nodes(request)
        audit("move.rejected", actor=approver, request=request, message=reason.strip())
        announce_event_after_commit(request.pk, Event.REJECTED)
    request.refresh_from_db()
    return request


def move_cancel(
    *, request: MoveRequest, user: AbstractBaseUser, reason: str = "", now: datetime
) -> MoveRequest:
    require_allowed(user, request, Action.CANCEL)
    with transaction.atomic():
        if not state_transition(
            request.pk, FROM_STATES[Action.CANCEL], State.CANCELLED, finished_at=now
        ):
            raise refuse_state(request, "cancel")
        release_nodes(request)
        audit("move.cancelled", actor=user, request=request, message=reason.strip())
    request.refresh_from_db()
    return request


def moves_expire(*, now: datetime) -> int:
    """Pending requests nobody decided on within MOVE_PENDING_HOURS expire and free their
    nodes; returns how many."""
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
                announce_event_after_commit(request.pk, Event.EXPIRED)
                expired += 1
    return expired
