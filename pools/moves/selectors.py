"""Reads of moves and loans for pages and the API: the lists, the open loans, and what
awaits a decision."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet

from pools.models import MoveItem, MoveRequest
from pools.moves.rules import OPEN_LOAN_STATES, Action, allowed_actions


def _loans() -> QuerySet[MoveRequest]:
    """Loans with what the loans page shows: each node and the pool it came from, the
    destination, and the return moves that point back to them."""
    return (
        MoveRequest.objects.filter(loan_until__isnull=False)
        .select_related("destination", "requested_by")
        .prefetch_related(
            Prefetch(
                "items",
                MoveItem.objects.select_related("node", "source_pool").order_by("node__name"),
            ),
            Prefetch(
                "children",
                MoveRequest.objects.filter(kind=MoveRequest.Kind.LOAN_RETURN).order_by("id"),
                to_attr="returns",
            ),
        )
        .annotate(nodes=Count("items"))
    )


# Open: not yet on its way back, or its return left nodes lent (tried again until back). The
# loans page and the insights' readiness check ask the same question.
ACTIVE_LOAN = Q(loan_return_requested_at__isnull=True, state__in=OPEN_LOAN_STATES) | Q(
    loan_return_stuck_since__isnull=False
)


def active_loans() -> list[MoveRequest]:
    """Open loans, the soonest to end first, and loans whose return left nodes lent."""
    return list(_loans().filter(ACTIVE_LOAN).order_by("loan_until"))


def ended_loans(*, limit: int = 50) -> list[MoveRequest]:
    """Loans whose nodes went back (or that never lent anything), the latest first."""
    return list(_loans().exclude(ACTIVE_LOAN).order_by("-loan_until", "-id")[:limit])


def moves_awaiting_decision_count(user: Any) -> int:
    """The pending requests `user` may approve, by the workflow's own rule (so never their
    own): the navigation's badge. One query."""
    pending = MoveRequest.objects.filter(state=MoveRequest.State.PENDING).only(
        "id", "state", "requested_by_id", "loan_until", "loan_return_requested_at"
    )
    return sum(Action.APPROVE in allowed_actions(user, move) for move in pending)


def moves_for_list() -> QuerySet[MoveRequest]:
    """Requests, newest first, with what the list shows: destination, requester, approvals
    and the number of nodes."""
    return (
        MoveRequest.objects.select_related("destination", "requested_by")
        .prefetch_related("approvals")
        .annotate(node_count=Count("items", distinct=True))
        .order_by("-created_at", "-id")
    )
