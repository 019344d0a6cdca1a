"""Celery tasks: thin, each takes ids and calls one service.

Tasks that change nodes acknowledge late and give their message back when the worker dies;
the database, not the broker, remembers what is done (see pools/execution.py).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.dispatch import receiver
from django.utils import timezone

from pools import execution, workflow
from pools.events import execution_wanted
from pools.idempotency import idempotency_records_purge
from pools.inventory.sync import inventory_safety_net
from portal.celery import NODE_CHANGING_TASK_OPTIONS


@shared_task(ignore_result=True)
def sync_inventory() -> str:
    return inventory_safety_net()


@shared_task(ignore_result=True, **NODE_CHANGING_TASK_OPTIONS)
def execute_move(request_id: int) -> int:
    items = execution.start_request(request_id)
    for chunk in execution.chunks(request_id, items):
        execute_move_items.delay(chunk)
    return len(items)


@shared_task(bind=True, ignore_result=True, max_retries=None, **NODE_CHANGING_TASK_OPTIONS)
def execute_move_items(self, item_ids: list[int]) -> int:  # type: ignore[no-untyped-def]
    waiting = execution.execute_items(item_ids)
    if waiting:
        # The nodes waiting for the Kubernetes API, again after a backoff: the execution
        # deadline, not a count of retries, decides when they fail.
        raise self.retry(args=[waiting], countdown=execution.retry_delay(self.request.retries))
    return len(item_ids)


@shared_task(bind=True, ignore_result=True, max_retries=None, **NODE_CHANGING_TASK_OPTIONS)
def execute_move_item(self, item_id: int) -> int:  # type: ignore[no-untyped-def]
    """One node (what the sweep enqueues)."""
    waiting = execution.execute_items([item_id])
    if waiting:
        raise self.retry(args=[item_id], countdown=execution.retry_delay(self.request.retries))
    return 1


@shared_task(ignore_result=True)
def sweep_moves() -> dict[str, int]:
    found = execution.sweep(now=timezone.now())
    for request_id in found["requests"]:
        execute_move.delay(request_id)
    for item_id in found["items"]:
        execute_move_item.delay(item_id)
    return {k: len(v) for k, v in found.items()}


@shared_task(ignore_result=True)
def return_loans() -> int:
    return len(workflow.loans_return_due(now=timezone.now()))


@shared_task(ignore_result=True)
def expire_moves() -> int:
    return workflow.moves_expire(now=timezone.now())


@shared_task(ignore_result=True)
def purge_idempotency_records() -> int:
    return idempotency_records_purge(now=timezone.now())


@receiver(execution_wanted)
def enqueue_execution(sender: Any, request_id: int, **kwargs: Any) -> None:
    """The workflow's announcement that a move may run (sent after its commit)."""
    execute_move.delay(request_id)
