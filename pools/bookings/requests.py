"""Booking nodes ahead: ask, approve (four eyes), reject, cancel. Pages, the API and scripts
call these; every step is audited.

Conflicts are checked when a booking is asked for (against the bookings that hold a window
and the open loans) and again when its last approval is given, with the source pool's row
locked, so two approvers approving conflicting bookings at once cannot both win: the second
waits for the first's commit, then sees its booking and refuses (PostgreSQL; SQLite
serialises every write anyway).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from pools.audit import audit
from pools.bookings.holdings import booking_holding, pool_holdings, pool_shape
from pools.bookings.notifications import announce_booking_after_commit
from pools.common.errors import InvalidInput, NotAllowed, Refused
from pools.common.roles import Capability, has_capability, refusal_reason
from pools.core.bookings import BookingAsked, Conflict, Window, booking_conflicts, booking_problems
from pools.core.names import label_value_problem
from pools.models import Booking, Pool
from pools.moves.loans import loan_end_early


class BookingConflicts(Refused):
    """The window conflicts with what else holds the pool's nodes then: nothing changes."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        super().__init__(
            f"booking_{conflicts[0].kind}",
            " ".join(c.message for c in conflicts),
            {"conflicts": [c.as_dict() for c in conflicts]},
        )
        self.conflicts = list(conflicts)


def _need(user: AbstractBaseUser, capability: Capability, doing: str) -> None:
    if not has_capability(user, capability):
        raise NotAllowed("forbidden", f"You may not {doing}. {refusal_reason(capability)}")


def booking_conflicts_of(booking: Booking) -> list[Conflict]:
    """What `booking` conflicts with now (it need not be saved)."""
    holding = booking_holding(booking)
    others = pool_holdings(
        booking.source, since=booking.starts_at, until=booking.ends_at, but=booking.pk
    )
    return booking_conflicts(holding, pool_shape(booking.source), others)


def _problems(asked: BookingAsked, source: Pool, destination: Pool, team: str) -> dict[str, str]:
    shape = pool_shape(source)
    unknown = tuple(sorted(set(asked.nodes) - set(shape.nodes)))
    problems = booking_problems(replace(asked, unknown_nodes=unknown), shape)
    if team and (problem := label_value_problem(team)):
        problems["team"] = f"A team is a label value: it {problem}."
    if destination.retired_at is not None:
        problems["destination"] = f"Pool {destination.name} is retired."
    return problems


def booking_ask(
    *,
    user: AbstractBaseUser,
    source: Pool,
    destination: Pool,
    starts_at: datetime,
    ends_at: datetime,
    reason: str,
    team: str = "",
    node_names: Sequence[str] = (),
    gpu_model: str = "",
    gpus: int = 0,
    now: datetime,
) -> Booking:
    """Ask for a booking: a 400 naming each bad field, a 409 listing each conflict (with
    the overlapping booking or loan and the moment), or the booking, pending its approvals.
    Nothing is written unless it is accepted."""
    _need(user, Capability.REQUEST_MOVE, "book nodes")
    names = tuple(dict.fromkeys(node_names))
    asked = BookingAsked(
        Window(starts_at, ends_at),
        now,
        source.name,
        destination.name,
        names,
        gpu_model.strip(),
        gpus,
        reason=reason,
    )
    if problems := _problems(asked, source, destination, team):
        raise InvalidInput("validation", " ".join(problems.values()), problems)
    booking = Booking(
        source=source,
        destination=destination,
        team=team,
        node_names=list(names),
        gpu_model=gpu_model.strip() if gpus else "",
        gpus=gpus,
        starts_at=starts_at,
        ends_at=ends_at,
        reason=reason.strip(),
        requested_by=user,
        approvals_required=max(1, source.approvals_required),
    )
    if conflicts := booking_conflicts_of(booking):
        raise BookingConflicts(conflicts)
    with transaction.atomic():
        booking.save()
        audit(
            "booking.requested",
            actor=user,
            booking=booking,
            message=f"booking #{booking.pk}: {booking.what} of {source.name} for "
            f"{team or 'no team'} into {destination.name}, {_window(booking)}: {booking.reason}",
        )
        announce_booking_after_commit(booking.pk, "requested")
    return booking


def _window(booking: Booking) -> str:
    return f"{booking.starts_at:%Y-%m-%d %H:%M} to {booking.ends_at:%Y-%m-%d %H:%M} UTC"


def _locked(booking_id: int, states: Sequence[str], doing: str) -> Booking:
    booking = Booking.objects.select_for_update().select_related("source").get(pk=booking_id)
    if booking.state not in states:
        raise Refused(
            "state_conflict", f"Cannot {doing} booking #{booking_id}: it is {booking.state}."
        )
    return booking


def booking_approve(
    booking_id: int, *, approver: AbstractBaseUser, reason: str = "", now: datetime
) -> Booking:
    """One approval; the last one needed checks the conflicts again (the source pool locked)
    and holds the window."""
    _need(approver, Capability.APPROVE_MOVE, "approve bookings")
    with transaction.atomic():
        # The pool's row first, then the booking's: approvals of one pool's bookings take
        # their turn, so the conflicts read below include any approved a moment ago.
        booking = Booking.objects.select_related("source").get(pk=booking_id)
        Pool.objects.select_for_update().get(pk=booking.source_id)
        booking = _locked(booking_id, [Booking.State.PENDING], "approve")
        if booking.requested_by_id == approver.pk:
            raise NotAllowed("self_approval", "Four eyes: you cannot approve your own booking.")
        if booking.approvals.filter(approver=approver).exists():
            raise Refused("already_approved", f"You have approved booking #{booking_id} already.")
        if booking.starts_at <= now:
            raise Refused("too_late", f"Booking #{booking_id} started before it was approved.")
        count = booking.approvals.count() + 1
        if count >= booking.approvals_required and (conflicts := booking_conflicts_of(booking)):
            raise BookingConflicts(conflicts)
        booking.approvals.create(approver=approver, comment=reason.strip())
        audit(
            "booking.approved",
            actor=approver,
            booking=booking,
            message=f"approval {count} of {booking.approvals_required}"
            + (f": {reason.strip()}" if reason.strip() else ""),
        )
        if count >= booking.approvals_required:
            Booking.objects.filter(pk=booking_id).update(
                state=Booking.State.APPROVED, decided_at=now
            )
            announce_booking_after_commit(booking_id, "approved")
    booking.refresh_from_db()
    return booking


def booking_reject(
    booking_id: int, *, approver: AbstractBaseUser, reason: str, now: datetime
) -> Booking:
    _need(approver, Capability.APPROVE_MOVE, "reject bookings")
    if not reason.strip():
        raise InvalidInput("validation", "Say why.", {"reason": "Required to reject."})
    with transaction.atomic():
        booking = _locked(booking_id, [Booking.State.PENDING], "reject")
        if booking.requested_by_id == approver.pk:
            raise NotAllowed("self_approval", "Four eyes: cancel your own booking instead.")
        Booking.objects.filter(pk=booking_id).update(
            state=Booking.State.REJECTED, decided_at=now, finished_at=now
        )
        audit("booking.rejected", actor=approver, booking=booking, message=reason.strip())
        announce_booking_after_commit(booking_id, "rejected")
    booking.refresh_from_db()
    return booking


def booking_cancel(
    booking_id: int, *, user: AbstractBaseUser, reason: str = "", now: datetime
) -> Booking:
    """Before its start, free the window; after it, end its loan early (the nodes go back
    now). Its requester or a pool admin."""
    with transaction.atomic():
        booking = _locked(booking_id, Booking.OPEN_STATES, "cancel")
        own = booking.requested_by_id == user.pk
        if not own and not has_capability(user, Capability.EDIT_POOLS):
            raise NotAllowed("forbidden", "Only its requester (or a pool admin) cancels a booking.")
        why = reason.strip() or "cancelled"
        if booking.state == Booking.State.STARTED and booking.loan is not None:
            loan_end_early(
                loan=booking.loan, user=user, reason=f"booking #{booking_id}: {why}", now=now
            )
            audit("booking.ended_early", actor=user, booking=booking, message=why)
        else:
            Booking.objects.filter(pk=booking_id).update(
                state=Booking.State.CANCELLED, finished_at=now
            )
            audit("booking.cancelled", actor=user, booking=booking, message=why)
    booking.refresh_from_db()
    return booking
