"""Celery tasks: thin wrappers that call one service each."""

from __future__ import annotations

from celery import shared_task

from pools.inventory import inventory_sync


@shared_task(ignore_result=True)
def sync_inventory() -> str:
    return str(inventory_sync())
