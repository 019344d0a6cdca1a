"""Loans: a move with an end time. Temporary sharing is allowed only inside an explicit
window, and must not silently become permanent: when the window closes the nodes go back
by themselves (pools/moves/loan_returns.py), and ending early or extending is an
approver's decision, never the requester's alone."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F

from pools.audit import audit
from pools.common.errors import InvalidMove, Refused
from pools.common.events import announce_event_after_commit
from pools.core.notices import Event
from pools.models import MoveRequest
from pools.moves.rules import OPEN_LOAN_STATES, Action, require_allowed


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
    return _loan_set_end(loan, approver, now if until is None else until, reason, until is None)


def loan_end_early(
    *, loan: MoveRequest, user: AbstractBaseUser, reason: str, now: datetime
) -> MoveRequest:
    """End a loan now for its booking's requester or a pool admin, who cancels the booking
    (pools.bookings): giving nodes back early takes nothing from anyone, so it needs no
    second person; the return runs as any loan's."""
    return _loan_set_end(loan, user, now, reason, True)


def _loan_set_end(
    loan: MoveRequest, user: AbstractBaseUser, new_end: datetime, reason: str, early: bool
) -> MoveRequest:
    with transaction.atomic():
        changed = MoveRequest.objects.filter(
            pk=loan.pk,
            loan_until__isnull=False,
            loan_return_requested_at__isnull=True,
            state__in=OPEN_LOAN_STATES,
        ).update(loan_until=new_end)
        if not changed:
            raise Refused("state_conflict", f"Move #{loan.pk} is not an open loan.")
        audit(
            "loan.ended_early" if early else "loan.extended",
            actor=user,
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
