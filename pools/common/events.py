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


def announce_execution_after_commit(request_id: int) -> None:
    """After commit. If the broker is down the approval still stands: the periodic sweep
    (pools.moves.execution.sweep) finds approved requests that never started and starts them."""

    def send() -> None:
        for receiver, outcome in execution_wanted.send_robust(sender=None, request_id=request_id):
            if isinstance(outcome, Exception):
                log.error(
                    "could not enqueue move #%s (%s: %s); the sweep will start it",
                    request_id,
                    getattr(receiver, "__name__", receiver),
                    outcome,
                )

    transaction.on_commit(send)


def announce_event_after_commit(request_id: int, event: str) -> None:
    """After commit, and never in the way: a receiver that fails (the broker down) is
    logged, and the step that announced stands."""

    def send() -> None:
        for receiver, outcome in move_event.send_robust(
            sender=None, request_id=request_id, event=event
        ):
            if isinstance(outcome, Exception):
                log.error(
                    "could not announce %s of move #%s (%s: %s); no notification goes out",
                    event,
                    request_id,
                    getattr(receiver, "__name__", receiver),
                    outcome,
                )

    transaction.on_commit(send)


# Sent with drill_id=<Drill pk> once a drill is recorded and may run.
drill_wanted = Signal()


def announce_drill_after_commit(drill_id: int) -> None:
    """After commit. If the broker is down the drill never takes its node down, and the
    beat's sweep (pools.drills.drills_end_overdue) records it as errored at its end."""

    def send() -> None:
        for receiver, outcome in drill_wanted.send_robust(sender=None, drill_id=drill_id):
            if isinstance(outcome, Exception):
                log.error(
                    "could not enqueue drill #%s (%s: %s)",
                    drill_id,
                    getattr(receiver, "__name__", receiver),
                    outcome,
                )

    transaction.on_commit(send)


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

    def send() -> None:
        signal, kwargs = (
            (maintenance_wanted, {}) if event is None else (maintenance_event, {"event": event})
        )
        for receiver, outcome in signal.send_robust(
            sender=None, maintenance_id=maintenance_id, **kwargs
        ):
            if isinstance(outcome, Exception):
                log.error(
                    "could not announce %s of maintenance #%s (%s: %s)",
                    event or "a step",
                    maintenance_id,
                    getattr(receiver, "__name__", receiver),
                    outcome,
                )

    transaction.on_commit(send)


# Sent with booking_id and event (pools.bookings.notifications.EVENTS) once a booking is
# asked for, decided, starts, cannot start, ends, or its start is a day or an hour away.
booking_event = Signal()


def announce_booking_event_after_commit(booking_id: int, event: str) -> None:
    def send() -> None:
        for receiver, outcome in booking_event.send_robust(
            sender=None, booking_id=booking_id, event=event
        ):
            if isinstance(outcome, Exception):
                log.error(
                    "could not announce %s of booking #%s (%s: %s)",
                    event,
                    booking_id,
                    getattr(receiver, "__name__", receiver),
                    outcome,
                )

    transaction.on_commit(send)
