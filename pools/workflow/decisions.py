"""One entry for every decision on a move: the move and loan pages and the API call
`move_decide` with an Action, and it takes the step that action names."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser

from pools.errors import InvalidMove
from pools.models import MoveRequest
from pools.workflow.loans import loan_change
from pools.workflow.rules import Action
from pools.workflow.transitions import move_approve, move_cancel, move_reject


def move_decide(
    *,
    move: MoveRequest,
    user: AbstractBaseUser,
    action: Action,
    reason: str = "",
    until: datetime | None = None,
    now: datetime,
) -> MoveRequest:
    """Approve, reject, cancel, end a loan now, or extend it to `until`; `reason` says why
    (required to reject and to change a loan, optional otherwise). Refusals raise
    pools.errors.WorkflowError and its kin."""
    if action is Action.APPROVE:
        return move_approve(request=move, approver=user, reason=reason, now=now)
    if action is Action.REJECT:
        return move_reject(request=move, approver=user, reason=reason, now=now)
    if action is Action.CANCEL:
        return move_cancel(request=move, user=user, reason=reason, now=now)
    if action is Action.EXTEND_LOAN and until is None:
        raise InvalidMove(
            "validation",
            "Say until when the loan is extended.",
            {"loan_until": "Required to extend a loan."},
        )
    return loan_change(
        loan=move,
        approver=user,
        until=until if action is Action.EXTEND_LOAN else None,
        reason=reason,
        now=now,
    )
