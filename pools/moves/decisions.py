"""One entry for every decision on a move: the move and loan pages and the API call
`move_decide` with an Action, and it takes the step that action names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser

from pools.common.errors import InvalidMove, Refused
from pools.models import MoveRequest
from pools.moves.loans import loan_change
from pools.moves.rules import Action
from pools.moves.transitions import move_approve, move_cancel, move_reject


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
    pools.common.errors.Refused and its kin."""
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


# A bulk decision is bounded: a page shows 50 moves, and one request holds one
# transaction per move, so a caller cannot make a request run for minutes.
BULK_LIMIT = 100
BULK_ACTIONS = (Action.APPROVE, Action.REJECT)


@dataclass(frozen=True)
class BulkOutcome:
    """How one move of a bulk decision went: `code` is "ok" or the refusal's code."""

    move_id: int
    ok: bool
    code: str
    message: str


def moves_decide_bulk(
    *,
    move_ids: Sequence[int],
    user: AbstractBaseUser,
    action: Action,
    reason: str = "",
    now: datetime,
) -> list[BulkOutcome]:
    """Approve or reject several moves with one reason, each through `move_decide` in its
    own transaction: four eyes holds per move, so one's own requests are refused and
    reported while the others are decided. Bad input as a whole (no ids, too many, a reject
    without a reason) raises InvalidMove before anything is written."""
    _bulk_check(move_ids, action, reason)
    moves = MoveRequest.objects.in_bulk(list(move_ids))
    outcomes = []
    for move_id in dict.fromkeys(move_ids):  # in the caller's order, once each
        move = moves.get(move_id)
        if move is None:
            outcomes.append(BulkOutcome(move_id, False, "not_found", "No such move."))
            continue
        try:
            move_decide(move=move, user=user, action=action, reason=reason, now=now)
        except Refused as exc:
            outcomes.append(BulkOutcome(move_id, False, exc.code, exc.message))
        else:
            outcomes.append(BulkOutcome(move_id, True, "ok", ""))
    return outcomes


def _bulk_check(move_ids: Sequence[int], action: Action, reason: str) -> None:
    if action not in BULK_ACTIONS:
        raise InvalidMove("validation", "Only approve and reject work in bulk.", {})
    if not move_ids:
        raise InvalidMove("validation", "Tick at least one move.", {"ids": "Required."})
    if len(set(move_ids)) > BULK_LIMIT:
        raise InvalidMove(
            "validation",
            f"At most {BULK_LIMIT} moves in one step.",
            {"ids": f"At most {BULK_LIMIT} moves."},
        )
    if action is Action.REJECT and not reason.strip():
        raise InvalidMove(
            "validation",
            "Say why the moves are rejected.",
            {"reason": "Required to reject."},
        )
