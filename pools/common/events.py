"""What the domain announces after a commit, without knowing who acts on it.

The workflow decides that a move may run; the Celery tasks run it. The workflow sends
`execution_wanted` once its transaction commits, and pools/tasks.py, connected when the app
is ready (pools/apps.py), enqueues the execution. So the workflow never imports the tasks,
and a test can see what was announced without a broker.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.dispatch import Signal

log = logging.getLogger(__name__)

# Sent with request_id=<MoveRequest pk> once an approved move (or a loan return) may run.
execution_wanted = Signal()
# Sent with request_id and event=<pools.core.notices.Event value> once a move was asked,
# decided, finished, or its loan nears its end: what notifications are made of.
move_event = Signal()


def _send_after_commit(signal: Signal, failed: str, **kwargs: object) -> None:
    """Send `signal` with `kwargs` once the transaction commits, never in the way: a receiver
    that fails (the broker down) is logged with `failed` ("could not enqueue move #3"), and
    the step that announced stands."""

    def send() -> None:
        for receiver, outcome in signal.send_robust(sender=None, **kwargs):
            if isinstance(outcome, Exception):
                name = getattr(receiver, "__name__", receiver)
                log.error("%s (%s: %s)", failed, name, outcome)

    send.signal = signal  # type: ignore[attr-defined]  -- what a test sees was queued
    transaction.on_commit(send)


def announce_execution_after_commit(request_id: int) -> None:
    """After commit. If the broker is down the approval still stands: the periodic sweep
    (pools.moves.execution.sweep) finds approved requests that never started and starts them."""
    _send_after_commit(
        execution_wanted,
        f"could not enqueue move #{request_id}; the sweep will start it",
        request_id=request_id,
    )


def announce_event_after_commit(request_id: int, event: str) -> None:
    """After commit, and never in the way: a receiver that fails (the broker down) is
    logged, and the step that announced stands."""
    _send_after_commit(
        move_event,
        f"could not announce {event} of move #{request_id}; no notification goes out",
        request_id=request_id,
        event=event,
    )


# Sent with drill_id=<Drill pk> once a drill is recorded and may run.
drill_wanted = Signal()


def announce_drill_after_commit(drill_id: int) -> None:
    """After commit. If the broker is down the drill never takes its node down, and the
    beat's sweep (pools.drills.drills_end_overdue) records it as errored at its end."""
    _send_after_commit(drill_wanted, f"could not enqueue drill #{drill_id}", drill_id=drill_id)


# Sent with maintenance_id=<Maintenance pk> once a maintenance may take its next step (it was
# started, confirmed, resumed or cancelled): the worker advances it at once, not at the beat's
# next tick.
maintenance_wanted = Signal()
# Sent with maintenance_id and event (pools.maintenance.notifications.EVENTS) once a wave
# waits for the operator, the maintenance pauses by itself, or it ends.
maintenance_event = Signal()


def announce_maintenance_after_commit(maintenance_id: int, event: str | None = None) -> None:
    """After commit, and never in the way: with the broker down the beat's tick advances the
    maintenance all the same, and the event's notification is logged as lost."""
    if event is None:
        failed = f"could not announce a step of maintenance #{maintenance_id}"
        _send_after_commit(maintenance_wanted, failed, maintenance_id=maintenance_id)
    else:
        failed = f"could not announce {event} of maintenance #{maintenance_id}"
        _send_after_commit(maintenance_event, failed, maintenance_id=maintenance_id, event=event)


# Sent with booking_id and event (pools.bookings.notifications.EVENTS) once a booking is
# asked for, decided, starts, cannot start, ends, or its start is a day or an hour away.
booking_event = Signal()


def announce_booking_event_after_commit(booking_id: int, event: str) -> None:
    _send_after_commit(
        booking_event,
        f"could not announce {event} of booking #{booking_id}",
        booking_id=booking_id,
        event=event,
    )


# Sent with reclaim_id once an approved reclaim may evict its pod: the worker asks at once, not
# at the beat's next tick.
reclaim_wanted = Signal()
# Sent with reclaim_id and event (pools.reclaim.notifications.EVENTS) once its owner is told,
# its grace ends, it is filed, decided, or ends.
reclaim_event = Signal()


def announce_reclaim_after_commit(reclaim_id: int, event: str | None = None) -> None:
    """After commit, and never in the way: with the broker down the beat's tick evicts an
    approved reclaim all the same, and the event's notification is logged as lost."""
    if event is None:
        failed = f"could not announce the eviction of reclaim #{reclaim_id}"
        _send_after_commit(reclaim_wanted, failed, reclaim_id=reclaim_id)
    else:
        failed = f"could not announce {event} of reclaim #{reclaim_id}"
        _send_after_commit(reclaim_event, failed, reclaim_id=reclaim_id, event=event)
