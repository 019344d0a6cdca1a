"""Bookings over time, the beat's part (every BOOKINGS_TICK_SECONDS): a booking not approved
by its start expires; an approved one becomes its loan at its start, through the same checks
and execution as any move; one whose nodes are not free then is tried again at each tick
until its end (its requester and the approvers told why, once per reason) and is missed if
it never could; a started one ends when its loan is back. Requesters are told a day and an
hour ahead.

A beat that was down across a booking's start starts it when it comes back, for what is left
of its window; the delay is recorded on the booking and in its audit event.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q

from pools.audit import audit
from pools.bookings.notifications import announce_booking_after_commit
from pools.common.errors import MoveRefused
from pools.core.bookings import nodes_for_gpus
from pools.models import Booking, Drill, MaintenanceNode, MoveItem, Node
from pools.moves.requests import booked_loan_create

DAY_AHEAD = timedelta(days=1)
HOUR_AHEAD = timedelta(hours=1)
# A start later than this after its time is recorded as late (the beat was not running).
LATE = timedelta(minutes=2)
State = Booking.State


def bookings_advance(*, now: datetime) -> dict[str, list[int]]:
    """One tick: the bookings expired, missed, started, blocked, ended, and told ahead."""
    done: dict[str, list[int]] = {"expired": [], "missed": [], "started": [], "blocked": []}
    for pk in Booking.objects.filter(state=State.PENDING, starts_at__lte=now).values_list(
        "pk", flat=True
    ):
        if _finish(pk, [State.PENDING], State.EXPIRED, now, "not approved before its start"):
            done["expired"].append(pk)
    for booking in Booking.objects.filter(state=State.APPROVED, starts_at__lte=now).select_related(
        "source", "destination", "requested_by"
    ):
        if booking.ends_at <= now:
            why = booking.start_blocked or "its window passed before it could start"
            if _finish(booking.pk, [State.APPROVED], State.MISSED, now, why):
                done["missed"].append(booking.pk)
        elif _start(booking, now):
            done["started"].append(booking.pk)
        else:
            done["blocked"].append(booking.pk)
    done["ended"] = _ended(now)
    done["told"] = _tell_ahead(now)
    return done


def _finish(pk: int, states: list[str], to: str, now: datetime, why: str) -> bool:
    with transaction.atomic():
        if not Booking.objects.filter(pk=pk, state__in=states).update(state=to, finished_at=now):
            return False
        audit(f"booking.{to}", booking=Booking(pk=pk), message=f"booking #{pk}: {why}")
        announce_booking_after_commit(pk, to)
    return True


def _busy(names: list[str]) -> dict[str, str]:
    """Why each of `names` cannot be lent now besides the move's own checks: a drill."""
    return {
        name: f"{name} is in drill #{pk}"
        for name, pk in Drill.objects.filter(
            state__in=Drill.ACTIVE_STATES, node_name__in=names
        ).values_list("node_name", "pk")
    }


def _nodes(booking: Booking) -> list[str] | str:
    """The nodes to lend, or why there are none."""
    if booking.node_names:
        return list(booking.node_names)
    held = set(MoveItem.objects.filter(active=True).values_list("node__name", flat=True))
    held |= set(
        MaintenanceNode.objects.filter(state__in=MaintenanceNode.UNFINISHED).values_list(
            "node__name", flat=True
        )
    )
    candidates = [
        (name, gpus, allocated)
        for name, gpus, allocated in Node.objects.present()
        .filter(pool=booking.source, gpu_model=booking.gpu_model, ready=True, cordoned=False)
        .values_list("name", "gpu_count", "gpu_allocated")
        if name not in held
    ]
    chosen = nodes_for_gpus(candidates, booking.gpus)
    if chosen is None:
        return (
            f"pool {booking.source.name} has no free set of nodes holding {booking.gpus} "
            f"{booking.gpu_model} GPUs now (other moves, maintenances or cordons hold some)"
        )
    return chosen


def _start(booking: Booking, now: datetime) -> bool:
    nodes = _nodes(booking)
    if isinstance(nodes, str):
        return _blocked(booking, nodes)
    if busy := _busy(nodes):
        return _blocked(booking, "; ".join(busy.values()))
    approvers = [
        (a.approver, f"approved booking #{booking.pk}")
        for a in booking.approvals.select_related("approver")
    ]
    delay = int((now - booking.starts_at).total_seconds())
    late = (
        f", {delay // 60} min late: the beat was not running at its start"
        if (now - booking.starts_at > LATE)
        else ""
    )
    try:
        with transaction.atomic():
            locked = Booking.objects.select_for_update().get(pk=booking.pk)
            if locked.state != State.APPROVED or locked.loan_id is not None:
                return False
            loan = booked_loan_create(
                requested_by=booking.requested_by,
                node_names=nodes,
                destination=booking.destination,
                reason=f"booking #{booking.pk}: {booking.reason}",
                loan_until=booking.ends_at,
                approvers=approvers,
                now=now,
            )
            Booking.objects.filter(pk=booking.pk).update(
                state=State.STARTED,
                loan=loan,
                taken=nodes,
                started_at=now,
                start_delay_seconds=max(delay, 0),
                start_blocked="",
            )
            audit(
                "booking.started",
                booking=booking,
                request=loan,
                message=f"booking #{booking.pk} became the loan of move #{loan.pk} "
                f"({', '.join(nodes)}){late}",
            )
            announce_booking_after_commit(booking.pk, "started")
    except MoveRefused as refused:
        return _blocked(booking, refused.message)
    return True


def _blocked(booking: Booking, why: str) -> bool:
    if booking.start_blocked == why:
        return False
    with transaction.atomic():
        Booking.objects.filter(pk=booking.pk).update(start_blocked=why)
        booking.start_blocked = why
        audit("booking.start_blocked", booking=booking, message=f"booking #{booking.pk}: {why}")
        announce_booking_after_commit(booking.pk, "start_blocked")
    return False


def _ended(now: datetime) -> list[int]:
    """Started bookings whose loan is back, or lent nothing (it failed)."""
    over = Booking.objects.filter(state=State.STARTED).filter(
        Q(loan__loan_returned_at__isnull=False)
        | Q(loan__state__in=["failed", "cancelled", "rejected", "expired"])
    )
    ended = []
    for pk in over.values_list("pk", flat=True):
        if _finish(pk, [State.STARTED], State.ENDED, now, "its loan is over"):
            ended.append(pk)
    return ended


def _tell_ahead(now: datetime) -> list[int]:
    told = []
    soon = Booking.objects.filter(state=State.APPROVED, starts_at__gt=now)
    for pk in soon.filter(starts_at__lte=now + HOUR_AHEAD, told_hour_ahead=False).values_list(
        "pk", flat=True
    ):
        with transaction.atomic():
            if Booking.objects.filter(pk=pk, told_hour_ahead=False).update(
                told_hour_ahead=True, told_day_ahead=True
            ):
                announce_booking_after_commit(pk, "hour_ahead")
                told.append(pk)
    for pk in soon.filter(starts_at__lte=now + DAY_AHEAD, told_day_ahead=False).values_list(
        "pk", flat=True
    ):
        with transaction.atomic():
            if Booking.objects.filter(pk=pk, told_day_ahead=False).update(told_day_ahead=True):
                announce_booking_after_commit(pk, "day_ahead")
                told.append(pk)
    return told
