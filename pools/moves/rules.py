"""Who may do what to a move, and from which state: the one place pages, the API and the
transitions ask.

`allowed_actions(user, move)` is what the move and loan pages show as buttons; every
transition calls `require_allowed` before it acts, so a button that shows works and a
request that bypasses the page is refused with the same rule. The state rule here is read
from the row as loaded; the transitions still take their step with a compare-and-swap on the
state, so a race is refused at that point.
"""

from __future__ import annotations

import enum

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from pools.common.errors import NotAllowed
from pools.common.roles import Capability, has_capability, refusal_reason
from pools.models import MoveRequest

State = MoveRequest.State
User = AbstractBaseUser | AnonymousUser


class Action(enum.StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    CANCEL = "cancel"
    END_LOAN = "end_loan"
    EXTEND_LOAN = "extend_loan"


LOAN_ACTIONS = frozenset({Action.END_LOAN, Action.EXTEND_LOAN})

# The least capability each action needs: what a page or an API endpoint declares as its
# gate. Cancelling is open to viewers at the gate because the rule is about ownership:
# the requester (who can request moves) or a pool admin.
ACTION_CAPABILITY = {
    Action.APPROVE: Capability.APPROVE_MOVE,
    Action.REJECT: Capability.APPROVE_MOVE,
    Action.CANCEL: Capability.VIEW,
    Action.END_LOAN: Capability.APPROVE_MOVE,
    Action.EXTEND_LOAN: Capability.APPROVE_MOVE,
}

# A loan is open from its request until its return is under way; a refused, cancelled,
# expired or failed move lent nothing.
OPEN_LOAN_STATES = (
    State.PENDING,
    State.APPROVED,
    State.EXECUTING,
    State.SUCCEEDED,
    State.PARTIALLY_FAILED,
)
FROM_STATES = {
    Action.APPROVE: (State.PENDING,),
    Action.REJECT: (State.PENDING,),
    Action.CANCEL: (State.PENDING,),
    Action.END_LOAN: OPEN_LOAN_STATES,
    Action.EXTEND_LOAN: OPEN_LOAN_STATES,
}

_DOING = {
    Action.APPROVE: "approve moves",
    Action.REJECT: "reject moves",
    Action.END_LOAN: "change loans",
    Action.EXTEND_LOAN: "change loans",
}
# Four eyes: whoever asked does not decide. Withdrawing one's own request is a cancel.
_OWN = {
    Action.APPROVE: "Four eyes: you cannot approve your own request.",
    Action.REJECT: "Four eyes: you cannot reject your own request; cancel it instead.",
    Action.END_LOAN: "Four eyes: you cannot change your own loan.",
    Action.EXTEND_LOAN: "Four eyes: you cannot change your own loan.",
}


def require_capability(user: User, capability: Capability, doing: str) -> None:
    if not has_capability(user, capability):
        raise NotAllowed("forbidden", f"You may not {doing}. {refusal_reason(capability)}")


def refusal(user: User, move: MoveRequest, action: Action) -> NotAllowed | None:
    """Why `user` may not take `action` on `move` whatever its state, or None."""
    own = move.requested_by_id is not None and move.requested_by_id == user.pk
    if action is Action.CANCEL:
        if (own and has_capability(user, Capability.REQUEST_MOVE)) or has_capability(
            user, Capability.EDIT_POOLS
        ):
            return None
        return NotAllowed("forbidden", "Only the requester (or a pool admin) can cancel a move.")
    try:
        require_capability(user, ACTION_CAPABILITY[action], _DOING[action])
    except NotAllowed as refused:
        return refused
    return NotAllowed("self_approval", _OWN[action]) if own else None


def require_allowed(user: User, move: MoveRequest, action: Action) -> None:
    if refused := refusal(user, move, action):
        raise refused


def state_allows(move: MoveRequest, action: Action) -> bool:
    """Whether `move`, as loaded, is in a state `action` starts from."""
    if action in LOAN_ACTIONS and (
        move.loan_until is None or move.loan_return_requested_at is not None
    ):
        return False
    return move.state in FROM_STATES[action]


def allowed_actions(user: User, move: MoveRequest) -> frozenset[Action]:
    """What `user` may do to `move` now."""
    return frozenset(
        action
        for action in Action
        if state_allows(move, action) and refusal(user, move, action) is None
    )
