"""The move workflow: ask, approve, reject, cancel, expire, and loans coming back.

- `plan`: what a move would do (the dry run): facts, checks, the diff per node;
- `requests`: asking for a move (`move_request_create`, or `move_request_ask` for a MoveAsk),
  or for a MIG reconfiguration (`reconfiguration_ask`);
- `rules`: who may do what to a move, from which state (`allowed_actions`);
- `transitions`: approve, reject, cancel, expire, each a guarded compare-and-swap;
- `decisions`: `move_decide`, the one entry pages and the API call for a decision;
- `loans`: loans ending early or extended, and told they end soon;
- `loan_returns`: loans returning when their window closes, tried again until they are back.

Execution (applying an approved move to the nodes) is pools.moves.execution; the workflow only
announces, after commit, that a move may run (pools.common.events).
"""

from pools.moves.decisions import BULK_LIMIT, BulkOutcome, move_decide, moves_decide_bulk
from pools.moves.loan_returns import loans_return_due
from pools.moves.loans import loan_change, loans_ending_announce
from pools.moves.plan import MoveAsk, MovePlan, PlannedNode, move_plan
from pools.moves.requests import move_request_ask, move_request_create, reconfiguration_ask
from pools.moves.rules import ACTION_CAPABILITY, Action, allowed_actions
from pools.moves.transitions import (
    move_approve,
    move_cancel,
    move_reject,
    moves_expire,
    release_nodes,
    state_transition,
)

__all__ = [
    "ACTION_CAPABILITY",
    "BULK_LIMIT",
    "Action",
    "BulkOutcome",
    "MoveAsk",
    "MovePlan",
    "PlannedNode",
    "allowed_actions",
    "loan_change",
    "loans_ending_announce",
    "loans_return_due",
    "move_approve",
    "move_cancel",
    "move_decide",
    "move_plan",
    "move_reject",
    "move_request_ask",
    "move_request_create",
    "moves_decide_bulk",
    "moves_expire",
    "reconfiguration_ask",
    "release_nodes",
    "state_transition",
]
