"""Loans: a move with an end time. Temporary sharing is allowed only inside an explicit
window, and must not silently become permanent: when the window closes the nodes go back
by themselves, and ending early or extending is an approver's decision, never the
requester's alone."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F

from pools.audit import audit
from pools.core.desired import move_target
from pools.core.labels import counted
from pools.core.notices import Event
from pools.errors import InvalidMove, WorkflowError
from pools.events import announce_event_after_commit, announce_execution_after_commit
from pools.models import MoveItem, MoveRequest, Pool
from pools.workflow.rules import OPEN_LOAN_STATES, Action, require_allowed

State = MoveRequest.State
# A loan returns once its own move is done (partly or wholly); an earlier state still runs.
RETURNABLE_STATES = (State.SUCCEEDED, State.PARTIALLY_FAILED)


def _claim_return(loan: MoveRequest, now: datetime) -> bool:
    """Mark the loan's return as requested; False when another beat got there first."""
    return bool(
        MoveRequest.objects.filter(pk=loan.pk, loan_return_requested_at__isnull=True).update(
            loan_return_requested_at=now
        )
    )


def _returnable_items(loan: MoveRequest) -> list[MoveItem]:
    """The loan's moved nodes that can go back now. A node another move holds cannot be
    returned under this one (one active move per node): that is put on the record instead
    of failing the whole return."""
    moved = list(
        loan.items.filter(
            state__in=[MoveItem.State.DONE, MoveItem.State.UNCHANGED],
            source_pool__isnull=False,
        ).select_related("node", "source_pool")
    )
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
    return [item for item in moved if item.node.name not in holders]


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
    target = move_target(
        back.destination.spec(),
        [p.spec() for p in Pool.objects.active()],
        pool_key=settings.POOL_LABEL_KEY,
    )
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


def loans_return_due(*, now: datetime) -> list[MoveRequest]:
    """Loans whose time is up go back to their source pools: one return move per source
    pool. Returns the return moves created."""
    returns: list[MoveRequest] = []
    due = MoveRequest.objects.filter(
        loan_until__lte=now, loan_return_requested_at__isnull=True, state__in=RETURNABLE_STATES
    )
    for loan in due:
        with transaction.atomic():
            if not _claim_return(loan, now):
                continue
            by_pool: dict[int, list[MoveItem]] = {}
            for item in _returnable_items(loan):
                by_pool.setdefault(item.source_pool_id, []).append(item)  # type: ignore[arg-type]
            returns += [_return_move(loan, items, now) for items in by_pool.values()]
    return returns


def loan_change(
    *,
    loan: MoveRequest,
    approver: AbstractBaseUser,
    until: datetime | None,
    reason: str,
    now: datetime,
) -> MoveRequest:
    """End a loan early (until=None) or extend it to `until`."""
    require_allowed(approver, loan, Action.END_LOAN if until is None else Action.EXTEND_LOAN)
    if not reason.strip():
        raise InvalidMove(
            "validation", "Say why the loan changes.", {"reason": "A loan change needs a reason."}
        )
    if until is not None and until <= now:
        raise InvalidMove(
            "validation",
            "A loan can only be extended into the future.",
            {"loan_until": "Must be in the future."},
        )
    new_end = now if until is None else until
    with transaction.atomic():
        changed = MoveRequest.objects.filter(
            pk=loan.pk,
            loan_until__isnull=False,
            loan_return_requested_at__isnull=True,
            state__in=OPEN_LOAN_STATES,
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


LOAN_ENDING_NOTICE = timedelta(hours=1)


def loans_ending_announce(*, now: datetime) -> list[int]:
    """Open loans that end within the hour, whose owner was not told about this end yet:
    each is claimed (compare-and-swap on the end told about, so two beats tell once) and
    announced. Returns the loans' ids."""
    due = MoveRequest.objects.filter(
        loan_until__gt=now,
        loan_until__lte=now + LOAN_ENDING_NOTICE,
        loan_return_requested_at__isnull=True,
        state__in=OPEN_LOAN_STATES,
    ).exclude(loan_end_notified_for=F("loan_until"))
    announced = []
    for pk, until, told in due.values_list("pk", "loan_until", "loan_end_notified_for"):
        with transaction.atomic():
            if MoveRequest.objects.filter(
                pk=pk, loan_until=until, loan_end_notified_for=told
            ).update(loan_end_notified_for=until):
                announce_event_after_commit(pk, Event.LOAN_ENDING)
                announced.append(pk)
    return announced
