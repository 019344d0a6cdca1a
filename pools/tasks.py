"""Celery tasks: thin, each takes ids and calls one service.

Tasks that change nodes acknowledge late and give their message back when the worker dies;
the database, not the broker, remembers what is done (see pools/moves/execution/run.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from celery import shared_task
from django.conf import settings
from django.dispatch import receiver
from django.utils import timezone

from pools import bookings, drills, moves
from pools.bookings import notifications as booking_notifications
from pools.common.cluster_access import served_clusters
from pools.common.events import (
    booking_event,
    drill_wanted,
    execution_wanted,
    maintenance_event,
    maintenance_wanted,
    move_event,
    reclaim_event,
    reclaim_wanted,
)
from pools.common.idempotency import idempotency_records_purge
from pools.core.cluster_scope import cluster_scope, scoped_cluster
from pools.insights import gather
from pools.inventory.sync import inventory_safety_net
from pools.maintenance import advance as maintenance
from pools.maintenance import notifications as maintenance_notifications
from pools.moves import notifications
from pools.moves.execution import run
from pools.notify import configured_channels
from pools.notify.errors import NotificationFailed
from pools.reclaim import evict as reclaim_evict
from pools.reclaim import notifications as reclaim_notifications
from pools.reclaim.sweep import reclaims_advance
from portal.celery import NODE_CHANGING_TASK_OPTIONS

log = logging.getLogger(__name__)
T = TypeVar("T")


def each_cluster(step: Callable[[], T]) -> list[T]:
    """A periodic step, for every cluster served, each in its own scope (its pools, nodes
    and moves; its API server and Prometheus); or for the one cluster the task was sent
    for (a sync asked from a page of that cluster)."""
    if scoped_cluster() is not None:
        return [step()]
    done, failed = [], []
    for cluster in served_clusters():
        # One cluster's trouble (its API server away) must not keep the others waiting.
        with cluster_scope(cluster):
            try:
                done.append(step())
            except Exception as exc:
                log.exception("cluster %s: a periodic step failed", cluster)
                failed.append(exc)
    if failed:
        raise failed[0]  # the task is reported failed, after every cluster had its turn
    return done


def _counts(found: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for counts in found:
        for key, count in counts.items():
            total[key] = total.get(key, 0) + count
    return total


@shared_task(ignore_result=True)
def sync_inventory() -> str:
    return "; ".join(each_cluster(inventory_safety_net))


def queue_inventory_sync() -> None:
    """A full sync now, asked for by the API (it also runs every INVENTORY_SYNC_SECONDS)."""
    sync_inventory.delay()


@shared_task(ignore_result=True, **NODE_CHANGING_TASK_OPTIONS)
def execute_move(request_id: int) -> int:
    items = run.start_request(request_id)
    for chunk in run.chunks(request_id, items):
        execute_move_items.delay(chunk)
    return len(items)


@shared_task(bind=True, ignore_result=True, max_retries=None, **NODE_CHANGING_TASK_OPTIONS)
def execute_move_items(self, item_ids: list[int]) -> int:  # type: ignore[no-untyped-def]
    waiting = run.execute_items(item_ids)
    if waiting:
        # The nodes waiting for the Kubernetes API, again after a backoff: the execution
        # deadline, not a count of retries, decides when they fail.
        raise self.retry(args=[waiting], countdown=run.retry_delay(self.request.retries))
    return len(item_ids)


@shared_task(bind=True, ignore_result=True, max_retries=None, **NODE_CHANGING_TASK_OPTIONS)
def execute_move_item(self, item_id: int) -> int:  # type: ignore[no-untyped-def]
    """One node (what the sweep enqueues)."""
    waiting = run.execute_items([item_id])
    if waiting:
        raise self.retry(args=[item_id], countdown=run.retry_delay(self.request.retries))
    return 1


@shared_task(ignore_result=True)
def sweep_moves() -> dict[str, int]:
    def step() -> dict[str, int]:
        found = run.sweep(now=timezone.now())
        for request_id in found["requests"]:
            execute_move.delay(request_id)
        for item_id in found["items"]:
            execute_move_item.delay(item_id)
        return {k: len(v) for k, v in found.items()}

    return _counts(each_cluster(step))


@shared_task(ignore_result=True)
def return_loans() -> int:
    return sum(each_cluster(lambda: len(moves.loans_return_due(now=timezone.now()))))


@shared_task(ignore_result=True)
def expire_moves() -> int:
    return sum(each_cluster(lambda: moves.moves_expire(now=timezone.now())))


@shared_task(ignore_result=True)
def run_drill(drill_id: int) -> None:
    drill = drills.drill_begin(drill_id, now=timezone.now())
    if drill is not None and drill.state == drill.State.RUNNING:
        finish_drill.apply_async((drill_id,), countdown=drill.hold_seconds)


@shared_task(ignore_result=True)
def finish_drill(drill_id: int) -> None:
    drills.drill_finish(drill_id, now=timezone.now())


@shared_task(ignore_result=True)
def end_overdue_drills() -> int:
    return sum(each_cluster(lambda: len(drills.drills_end_overdue(now=timezone.now()))))


@shared_task(ignore_result=True)
def refresh_insights() -> int:
    return sum(
        each_cluster(lambda: gather.insights_refresh(days=gather.DEFAULT_DAYS, now=timezone.now()))
    )


@shared_task(ignore_result=True)
def purge_idempotency_records() -> int:
    return idempotency_records_purge(now=timezone.now())


@receiver(execution_wanted)
def enqueue_execution(sender: Any, request_id: int, **kwargs: Any) -> None:
    """The workflow's announcement that a move may run (sent after its commit)."""
    execute_move.delay(request_id)


# --- notifications: one task a channel, retried on transient failures, never in a move's way


@shared_task(ignore_result=True)
def announce_loans_ending() -> int:
    return sum(each_cluster(lambda: len(moves.loans_ending_announce(now=timezone.now()))))


def _deliver(
    task: Any, channel: str, send: Callable[..., object], event: str, request_id: int
) -> None:
    try:
        send(event=event, request_id=request_id)
    except NotificationFailed as exc:
        retries = task.request.retries
        if exc.transient and retries < settings.NOTIFY_MAX_RETRIES:
            log.warning("move #%s %s: %s failed (%s), retrying", request_id, event, channel, exc)
            raise task.retry(countdown=settings.NOTIFY_RETRY_SECONDS * 2**retries) from None
        log.error(
            "move #%s %s: %s not delivered after %d tries: %s",
            request_id,
            event,
            channel,
            retries + 1,
            exc,
        )


@shared_task(bind=True, ignore_result=True, max_retries=None)
def notify_email(self, event: str, request_id: int) -> None:  # type: ignore[no-untyped-def]
    _deliver(self, "e-mail", notifications.notification_email, event, request_id)


@shared_task(bind=True, ignore_result=True, max_retries=None)
def notify_webhook(self, event: str, request_id: int) -> None:  # type: ignore[no-untyped-def]
    _deliver(self, "webhook", notifications.notification_webhook, event, request_id)


@receiver(move_event)
def enqueue_notifications(sender: Any, request_id: int, event: str, **kwargs: Any) -> None:
    """The workflow's announcement of an event (after its commit). retry=False: with the
    broker down this fails at once (logged by pools.common.events) instead of holding the caller."""
    if settings.NOTIFY_EMAIL:
        notify_email.apply_async((event, request_id), retry=False)
    if settings.NOTIFY_WEBHOOK_URL:
        notify_webhook.apply_async((event, request_id), retry=False)


@receiver(drill_wanted)
def enqueue_drill(sender: Any, drill_id: int, **kwargs: Any) -> None:
    """A drill recorded (sent after its commit)."""
    run_drill.delay(drill_id)


# --- maintenances: a step at each tick, and at once when someone takes one


@shared_task(ignore_result=True)
def advance_maintenances() -> int:
    return sum(each_cluster(lambda: len(maintenance.maintenances_advance(now=timezone.now()))))


@shared_task(ignore_result=True)
def advance_maintenance(maintenance_id: int) -> None:
    maintenance.maintenance_advance(maintenance_id, now=timezone.now())


@receiver(maintenance_wanted)
def enqueue_maintenance(sender: Any, maintenance_id: int, **kwargs: Any) -> None:
    advance_maintenance.delay(maintenance_id)


def _send_or_retry(task: Any, send: Callable[[], object], what: str) -> None:
    """One notification of a maintenance or a booking; a transient failure is retried with
    a backoff, a bounded number of times, then logged."""
    try:
        send()
    except NotificationFailed as exc:
        retries = task.request.retries
        if exc.transient and retries < settings.NOTIFY_MAX_RETRIES:
            raise task.retry(countdown=settings.NOTIFY_RETRY_SECONDS * 2**retries) from None
        log.error("%s: not delivered: %s", what, exc)


@shared_task(bind=True, ignore_result=True, max_retries=None)
def notify_maintenance(self, channel: str, event: str, maintenance_id: int) -> None:  # type: ignore[no-untyped-def]
    send = maintenance_notifications.SENDERS[channel]
    _send_or_retry(
        self,
        lambda: send(event=event, maintenance_id=maintenance_id),
        f"maintenance #{maintenance_id} {event} by {channel}",
    )


@receiver(maintenance_event)
def enqueue_maintenance_notifications(
    sender: Any, maintenance_id: int, event: str, **kwargs: Any
) -> None:
    for channel in configured_channels():
        notify_maintenance.apply_async((channel, event, maintenance_id), retry=False)


# --- bookings: started, ended and told ahead at each tick


@shared_task(ignore_result=True)
def advance_bookings() -> dict[str, int]:
    def step() -> dict[str, int]:
        return {k: len(v) for k, v in bookings.bookings_advance(now=timezone.now()).items()}

    return _counts(each_cluster(step))


@shared_task(bind=True, ignore_result=True, max_retries=None)
def notify_booking(self, channel: str, event: str, booking_id: int) -> None:  # type: ignore[no-untyped-def]
    send = booking_notifications.SENDERS[channel]
    _send_or_retry(
        self,
        lambda: send(event=event, booking_id=booking_id),
        f"booking #{booking_id} {event} by {channel}",
    )


@receiver(booking_event)
def enqueue_booking_notifications(sender: Any, booking_id: int, event: str, **kwargs: Any) -> None:
    for channel in configured_channels():
        notify_booking.apply_async((channel, event, booking_id), retry=False)


# --- reclaims: the sweep at each tick, and an approved one's eviction at once


@shared_task(ignore_result=True)
def advance_reclaims() -> dict[str, int]:
    def step() -> dict[str, int]:
        return {k: len(v) for k, v in reclaims_advance(now=timezone.now()).items()}

    return _counts(each_cluster(step))


@shared_task(ignore_result=True)
def evict_reclaim(reclaim_id: int) -> None:
    reclaim_evict.reclaim_evict(reclaim_id, now=timezone.now())


@receiver(reclaim_wanted)
def enqueue_reclaim_eviction(sender: Any, reclaim_id: int, **kwargs: Any) -> None:
    evict_reclaim.delay(reclaim_id)


@shared_task(bind=True, ignore_result=True, max_retries=None)
def notify_reclaim(self, channel: str, event: str, reclaim_id: int) -> None:  # type: ignore[no-untyped-def]
    send = reclaim_notifications.SENDERS[channel]
    _send_or_retry(
        self,
        lambda: send(event=event, reclaim_id=reclaim_id),
        f"reclaim #{reclaim_id} {event} by {channel}",
    )


@receiver(reclaim_event)
def enqueue_reclaim_notifications(sender: Any, reclaim_id: int, event: str, **kwargs: Any) -> None:
    for channel in configured_channels():
        notify_reclaim.apply_async((channel, event, reclaim_id), retry=False)
