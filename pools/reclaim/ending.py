"""Ending an open reclaim, from the sweep or a policy turned off. An approved reclaim is the
worker's alone to end (it may be asking the API server this moment): it is told to stop, and
ends so at its next attempt instead of evicting. Any other ends here, once (a conditional
UPDATE: two sweeps at once end it one time)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from pools.audit import audit
from pools.common.events import announce_reclaim_after_commit
from pools.models import Pool, Reclaim

STATE = Reclaim.State


def reclaim_end(reclaim: Reclaim, state: str, why: str, now: datetime) -> bool:
    """End `reclaim` as `state`, or tell its worker to; whether this call changed it."""
    if reclaim.state == STATE.APPROVED:
        return bool(
            Reclaim.objects.filter(
                pk=reclaim.pk, state=STATE.APPROVED, finished_at__isnull=True, stop_state=""
            ).update(stop_state=state, stop_why=why)
        )
    with transaction.atomic():
        ended = Reclaim.objects.filter(pk=reclaim.pk, finished_at__isnull=True).exclude(
            state=STATE.APPROVED
        )
        if not ended.update(state=state, finished_at=now, outcome=why):
            return False
        closed = reclaim.state == STATE.REJECTED  # a kept pod that worked again: no news
        audit(
            "reclaim.closed" if closed else f"reclaim.{state}",
            reclaim=reclaim,
            node_name=reclaim.node_name,
            message=f"{reclaim.namespace}/{reclaim.pod}: {why}",
        )
        if not closed:
            announce_reclaim_after_commit(reclaim.pk, "ended")
    return True


def pool_reclaims_cancel(pool: Pool, why: str, now: datetime) -> list[int]:
    """Every open reclaim of `pool` cancelled (its policy turned off, the pool retired)."""
    cancelled = []
    for reclaim in Reclaim.objects.filter(pool=pool, finished_at__isnull=True):
        if reclaim_end(reclaim, STATE.CANCELLED, why, now):
            cancelled.append(reclaim.pk)
    return cancelled
