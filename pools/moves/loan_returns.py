"""Loans going back: when the window closes, one approved return move per source pool; and
until every lent node is back, the return is tried again.

A return may leave nodes lent: another move holds one (one active move per node), or its
return move failed. Such a loan is flagged (its page, the loans page, the pool's
readiness), its owner and the approvers are told once, and the beat tries again with a
delay that doubles from a minute up to an hour, until every node is back or has left the
pool the loan lent it to by another move.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from pools.audit import audit
from pools.common.events import announce_event_after_commit, announce_execution_after_commit
from pools.core.notices import Event
from pools.core.wording import counted
from pools.fleet.targets import pool_target
from pools.models import MoveItem, MoveRequest

State = MoveRequest.State
# A loan returns once its own move is done (partly or wholly); an earlier state still runs.
RETURNABLE_STATES = (State.SUCCEEDED, State.PARTIALLY_FAILED)
BACK = (MoveItem.State.DONE, MoveItem.State.UNCHANGED)
RETRY_FIRST = timedelta(minutes=1)
RETRY_MOST = timedelta(hours=1)


def loan_retry_delay(rounds: int) -> timedelta:
    """How long after its `rounds`-th round left nodes lent a loan's return is tried again."""
    return min(RETRY_MOST, RETRY_FIRST * 2 ** min(max(rounds - 1, 0), 16))


def _claim_return(loan: MoveRequest, now: datetime) -> bool:
    """Mark the loan's return as requested; False when another beat got there first."""
    return bool(
        MoveRequest.objects.filter(pk=loan.pk, loan_return_requested_at__isnull=True).update(
            loan_return_requested_at=now, loan_return_attempts=1
        )
    )


def _holders(items: list[MoveItem]) -> dict[str, int]:
    """Node name -> the move that holds it now (one active move per node)."""
    return dict(
        MoveItem.objects.filter(active=True, node__in=[i.node for i in items]).values_list(
            "node__name", "request_id"
        )
    )


def _returnable_items(loan: MoveRequest, items: list[MoveItem]) -> list[MoveItem]:
    """Those of `items` that can go back now. A node another move holds cannot be returned
    under this one: that is put on the record, and the return tried again later."""
    holders = _holders(items)
    for item in items:
        if item.node.name in holders:
            audit(
                "loan.return_blocked",
                request=loan,
                node_name=item.node.name,
                message=f"move #{holders[item.node.name]} holds the node; its return to "
                f"{item.source_pool.name} is tried again later",
            )
    return [item for item in items if item.node.name not in holders]


def _lent_items(loan: MoveRequest) -> list[MoveItem]:
    """The nodes the loan moved, with the pool each came from."""
    return list(
        loan.items.filter(state__in=BACK, source_pool__isnull=False).select_related(
            "node", "source_pool"
        )
    )


def _return_move(loan: MoveRequest, items: list[MoveItem], now: datetime) -> MoveRequest:
    """A system move of `items` (all from one source pool) back where they came from,
    approved already: the window was."""
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
    # The pool it goes back to, as that pool is defined now: the loan's window approved it.
    target = pool_target(back.destination.spec())
    MoveItem.objects.bulk_create(
        [
            MoveItem(
                request=back,
                node=item.node,
                source_pool=loan.destination,
                source_label=loan.destination.name,
                planned_diff={},
                **MoveItem.approved(item.node, target),
            )
            for item in items
        ]
    )
    audit(
        "loan.returning",
        request=back,
        message=f"{counted(len(items), 'node')} back to {back.destination.name} "
        f"(loan of move #{loan.pk} ended)",
    )
    announce_execution_after_commit(back.pk)
    return back


def _return_moves(loan: MoveRequest, items: list[MoveItem], now: datetime) -> list[MoveRequest]:
    """One return move per source pool for those of `items` no other move holds."""
    by_pool: dict[int, list[MoveItem]] = {}
    for item in _returnable_items(loan, items):
        by_pool.setdefault(item.source_pool_id, []).append(item)  # type: ignore[arg-type]
    return [_return_move(loan, pool_items, now) for pool_items in by_pool.values()]


def loans_return_due(*, now: datetime) -> list[MoveRequest]:
    """Loans whose time is up go back to their source pools, and loans whose return left
    nodes lent are checked and tried again when due. Returns the return moves created."""
    returns: list[MoveRequest] = []
    due = MoveRequest.objects.filter(
        loan_until__lte=now, loan_return_requested_at__isnull=True, state__in=RETURNABLE_STATES
    )
    for loan in due:
        with transaction.atomic():
            if _claim_return(loan, now):
                returns += _return_moves(loan, _lent_items(loan), now)
    unsettled = MoveRequest.objects.filter(
        loan_return_requested_at__isnull=False, loan_returned_at__isnull=True
    ).exclude(children__state__in=MoveRequest.ACTIVE_STATES)  # a return still running: wait
    for loan in unsettled.select_related("destination", "requested_by"):
        with transaction.atomic():
            returns += _loan_return_followed(loan, now)
    return returns


def _still_lent(loan: MoveRequest) -> list[MoveItem]:
    """The lent nodes not back yet: not returned by a return move, and still in the pool
    the loan lent them to (a node another move took elsewhere, or gone, has nothing to
    return)."""
    returned = set(
        MoveItem.objects.filter(
            request__parent=loan, request__kind=MoveRequest.Kind.LOAN_RETURN, state__in=BACK
        ).values_list("node_id", flat=True)
    )
    return [
        item
        for item in _lent_items(loan)
        if item.node_id not in returned
        and item.node.pool_id == loan.destination_id
        and item.node.gone_at is None
    ]


def _why_lent(loan: MoveRequest, items: list[MoveItem]) -> list[dict[str, str]]:
    holders = _holders(items)
    failed = dict(
        MoveItem.objects.filter(
            request__parent=loan, node__in=[i.node for i in items], state=MoveItem.State.FAILED
        )
        .order_by("id")
        .values_list("node__name", "error")
    )  # the latest failure of each node last, so it wins
    return [
        {
            "node": i.node.name,
            "why": f"move #{holders[i.node.name]} holds the node"
            if i.node.name in holders
            else f"its return failed: {failed[i.node.name]}"
            if i.node.name in failed
            else "not returned yet",
        }
        for i in items
    ]


def _loan_return_followed(loan: MoveRequest, now: datetime) -> list[MoveRequest]:
    """One beat's look at a loan whose return was requested and no return move runs: done,
    flagged (and told once), or tried again when due. Returns the return moves created.
    Each step is a compare-and-swap on the round's number, so two beats take it once."""
    left = _still_lent(loan)
    this_round = MoveRequest.objects.filter(
        pk=loan.pk, loan_returned_at__isnull=True, loan_return_attempts=loan.loan_return_attempts
    )
    if not left:
        if (
            this_round.update(
                loan_returned_at=now,
                loan_return_stuck_since=None,
                loan_return_retry_at=None,
                loan_return_left=[],
            )
            and loan.loan_return_stuck_since is not None
        ):
            audit("loan.returned", request=loan, message="every lent node is back")
        return []
    if loan.loan_return_retry_at is None:
        _flag(loan, left, now)
        return []
    if loan.loan_return_retry_at > now:
        return []
    if not this_round.update(
        loan_return_attempts=loan.loan_return_attempts + 1, loan_return_retry_at=None
    ):
        return []
    loan.loan_return_attempts += 1
    loan.loan_return_retry_at = None
    backs = _return_moves(loan, left, now)
    if not backs:  # another move still holds every node: the next round's time, now
        _flag(loan, left, now)
    return backs


def _flag(loan: MoveRequest, left: list[MoveItem], now: datetime) -> None:
    """The round left `left` lent: say so on the loan, and when the next round is due;
    the first time, tell its owner and the approvers."""
    retry_at = now + loan_retry_delay(loan.loan_return_attempts)
    if not MoveRequest.objects.filter(
        pk=loan.pk,
        loan_return_attempts=loan.loan_return_attempts,
        loan_return_retry_at__isnull=True,
    ).update(
        loan_return_stuck_since=loan.loan_return_stuck_since or now,
        loan_return_left=_why_lent(loan, left),
        loan_return_retry_at=retry_at,
    ):
        return
    audit(
        "loan.return_stuck",
        request=loan,
        message=f"{counted(len(left), 'node')} still lent to {loan.destination.name} after "
        f"{counted(loan.loan_return_attempts, 'round')} of returns "
        f"({', '.join(i.node.name for i in left)}); tried again at {retry_at:%Y-%m-%d %H:%M} UTC",
    )
    if loan.loan_return_stuck_since is None:
        announce_event_after_commit(loan.pk, Event.LOAN_RETURN_STUCK)
