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
