"""An approved reclaim's eviction, the worker's part: the pod noticed (by its uid, never one
made again under its name) is evicted through the eviction API, so its disruption budget is
kept by the API server itself. Nothing is ever deleted.

- A budget that refuses (429) is asked again after its Retry-After, or at the next tick; each
  change of its words is audited once. Past RECLAIM_EVICT_DEADLINE_SECONDS the reclaim fails,
  with the budget's words.
- The pod must have been seen idle by a recent sweep: when Prometheus has not confirmed it for
  a while, the eviction waits, saying so, rather than act on old figures.
- It ends instead of evicting when the sweep said so (the pod worked again, opted out), or the
  pool was retired, its policy turned off, or the pod moved to another pool since.
- A claim (`next_try_at` moved ahead with a conditional UPDATE) keeps two workers from asking
  at once; a worker that dies holding it is replaced when the claim runs out.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

from pools.audit import audit
from pools.common.events import announce_reclaim_after_commit
from pools.kube import drain
from pools.kube.errors import KubeError
from pools.models import GpuPod, Reclaim, ReclaimPolicy

log = logging.getLogger(__name__)
CLAIM_SECONDS = 120
STATE = Reclaim.State


def idle_confirmed_within() -> timedelta:
    """How old the last sweep's sight of the pod idle may be: a few ticks."""
    return timedelta(seconds=max(600, 3 * settings.RECLAIM_TICK_SECONDS))


def reclaim_evict(reclaim_id: int, *, now: datetime) -> Reclaim | None:
    """One attempt; None when another worker holds it, it is not approved, or its next try has
    not come."""
    claimed = Reclaim.objects.filter(
        Q(next_try_at__isnull=True) | Q(next_try_at__lte=now),
        pk=reclaim_id,
        state=STATE.APPROVED,
        finished_at__isnull=True,
    ).update(next_try_at=now + timedelta(seconds=CLAIM_SECONDS))
    if not claimed:
        return None
    reclaim = Reclaim.objects.select_related("pool").get(pk=reclaim_id)
    retry_at = now + timedelta(seconds=settings.RECLAIM_TICK_SECONDS)
    pod = GpuPod.objects.live().filter(uid=reclaim.pod_uid).first()
    if (stop := _must_stop(reclaim, pod)) is not None:
        _end(reclaim, *stop, now)
    elif reclaim.evict_deadline is not None and now >= reclaim.evict_deadline:
        words = reclaim.refused or "it could not be evicted"
        _end(reclaim, STATE.FAILED, f"not evicted before the deadline: {words}", now)
    elif pod is not None and reclaim.last_seen_idle_at < now - idle_confirmed_within():
        # (A pod the inventory no longer knows is asked for all the same: the API says 404.)
        seen = f"{reclaim.last_seen_idle_at:%Y-%m-%d %H:%M} UTC"
        why = f"waiting for Prometheus to confirm it is still idle (last: {seen})"
        _wait(reclaim, why, retry_at)
    else:
        _ask(reclaim, now, retry_at)
    reclaim.refresh_from_db()
    return reclaim


def _must_stop(reclaim: Reclaim, pod: GpuPod | None) -> tuple[str, str] | None:
    """Why an approved reclaim must end instead of evicting: the sweep said so, its pool was
    retired or its policy turned off since the approval, or its pod runs in another pool."""
    if reclaim.stop_state:
        return reclaim.stop_state, reclaim.stop_why
    pool = reclaim.pool
    if pool.retired_at is not None:
        return STATE.CANCELLED, f"the pool {pool.name} was retired"
    if not ReclaimPolicy.objects.filter(pool=pool, enabled=True).exists():
        return STATE.CANCELLED, "the pool's reclaim policy was turned off"
    if pod is not None and pod.pool_label != pool.name:
        where = pod.pool_label or "of unassigned nodes"
        return STATE.CANCELLED, f"its node moved to the pool {where}: not reclaimed here"
    if pod is not None and pod.reclaim_opt_out:
        return STATE.OPTED_OUT, "its owner annotated it never to be reclaimed"
    return None


def _ask(reclaim: Reclaim, now: datetime, retry_at: datetime) -> None:
    name = f"{reclaim.namespace}/{reclaim.pod}"
    try:
        answer = drain.evict_exact(reclaim.namespace, reclaim.pod, reclaim.pod_uid)
    except KubeError as exc:
        log.warning("reclaim #%s: %s", reclaim.pk, exc)
        _wait(reclaim, f"the Kubernetes API: {exc} (asked again at the next tick)", retry_at)
        return
    if answer == drain.EVICTED:
        _end(reclaim, STATE.EVICTED, f"{name} evicted through the eviction API", now)
    elif answer == drain.GONE:
        _end(reclaim, STATE.RECOVERED, "the pod went away before its eviction", now)
    else:
        assert isinstance(answer, drain.EvictionRefused)
        if answer.message != reclaim.refused:
            audit(
                "pod.eviction_refused",
                reclaim=reclaim,
                node_name=reclaim.node_name,
                message=f"reclaim #{reclaim.pk}: {name}: {answer.message}",
            )
        wait = answer.retry_after
        _wait(reclaim, answer.message, now + timedelta(seconds=wait) if wait else retry_at)


def _mine(reclaim: Reclaim) -> QuerySet[Reclaim]:
    return Reclaim.objects.filter(pk=reclaim.pk, state=STATE.APPROVED, finished_at__isnull=True)


def _wait(reclaim: Reclaim, why: str, until: datetime) -> None:
    _mine(reclaim).update(refused=why, next_try_at=until)


def _end(reclaim: Reclaim, state: str, why: str, now: datetime) -> None:
    with transaction.atomic():
        if not _mine(reclaim).update(state=state, finished_at=now, outcome=why, next_try_at=None):
            return
        action = "pod.evicted" if state == STATE.EVICTED else f"reclaim.{state}"
        audit(
            action,
            reclaim=reclaim,
            node_name=reclaim.node_name,
            message=f"reclaim #{reclaim.pk}: {why}",
        )
        announce_reclaim_after_commit(reclaim.pk, "ended")
