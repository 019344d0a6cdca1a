"""Reclaims over time, the beat's part (every RECLAIM_TICK_SECONDS).

For each active pool whose policy is on, the candidates are read: one PromQL query (their
window), plus the costly one (a week of idle hours in one-minute steps) only when there are
new ones to notice, and one SQL query. A new candidate that has not opted out gets a reclaim:
its owner is told and given the policy's grace. An open reclaim goes on as its pod does: it
ends when the pod works again, goes away, opts out or moves to another pool; once the grace is
over it is due, and its prefilled request waits for someone to file it.

Nothing is decided on missing metrics: when Prometheus cannot answer, nothing is noticed and
nothing ends; a followed pod that is no longer idle ends only if it still has GPU series (one
more query, for those pods only), and a followed pod's idle hours grow only by the time the
sweeps saw it idle.

Then every approved reclaim is asked to evict (pools.reclaim.evict). A pool whose policy was
turned off, or that was retired, has its open reclaims cancelled.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from pools.audit import audit
from pools.common.events import announce_reclaim_after_commit
from pools.core.reclaim import MAX_HOURS, Candidate, Seen, prefilled_reason, reclaim_fate
from pools.metrics.queries import pods_reporting_query
from pools.metrics.source import instant
from pools.models import GpuPod, Pool, Reclaim, ReclaimPolicy
from pools.reclaim import pool_reclaim_candidates, with_week_hours
from pools.reclaim.ending import reclaim_end
from pools.reclaim.evict import reclaim_evict

log = logging.getLogger(__name__)
STATE = Reclaim.State
Done = dict[str, list[int]]


def reclaims_advance(*, now: datetime) -> Done:
    """One sweep; the reclaims each step touched, by what happened to them."""
    done: Done = defaultdict(list)
    _cancel_where_off(now, done)
    for pool in Pool.objects.active().filter(reclaim_policy__enabled=True):
        _sweep_pool(pool, now, done)
    approved = Reclaim.objects.filter(state=STATE.APPROVED, finished_at__isnull=True)
    for pk in approved.values_list("pk", flat=True):
        found = reclaim_evict(pk, now=now)
        if found is not None and found.state != STATE.APPROVED:
            done[found.state].append(pk)
    return dict(done)


def _cancel_where_off(now: datetime, done: Done) -> None:
    on = ReclaimPolicy.objects.filter(enabled=True, pool__retired_at__isnull=True)
    stale = Reclaim.objects.filter(finished_at__isnull=True).exclude(
        pool_id__in=on.values("pool_id")
    )
    for reclaim in stale.select_related("pool"):
        why = (
            f"the pool {reclaim.pool.name} was retired"
            if reclaim.pool.retired_at
            else "the pool's reclaim policy was turned off"
        )
        if reclaim_end(reclaim, STATE.CANCELLED, why, now) and reclaim.state != STATE.APPROVED:
            done[STATE.CANCELLED].append(reclaim.pk)


def _sweep_pool(pool: Pool, now: datetime, done: Done) -> None:
    found = pool_reclaim_candidates(pool, week_hours=False)
    if found.metrics_error:
        log.warning("reclaims of %s: nothing decided: %s", pool.name, found.metrics_error)
        return
    idle = {c.pod.uid for c in found.candidates}
    running = {p.uid: p for p in found.held}
    rows = list(Reclaim.objects.filter(pool=pool, finished_at__isnull=True))
    elsewhere = _pools_of([r.pod_uid for r in rows if r.pod_uid not in running])
    reporting = _reporting([r for r in rows if r.pod_uid in running and r.pod_uid not in idle])
    for reclaim in rows:
        pod = running.get(reclaim.pod_uid)
        moved = elsewhere.get(reclaim.pod_uid)
        seen = Seen(
            running=pod is not None,
            idle=reclaim.pod_uid in idle,
            opted_out=bool(pod and pod.opted_out),
            reporting=(reclaim.namespace, reclaim.pod) in reporting,
            moved_to=(moved or "of unassigned nodes") if moved not in (None, pool.name) else "",
        )
        if seen.idle:
            _seen_idle(reclaim, now)
        fate = reclaim_fate(reclaim.state, seen, grace_until=reclaim.grace_until, now=now)
        if fate is None:
            continue
        if not fate.finished:
            _due(reclaim, fate.why)
            done[fate.state].append(reclaim.pk)
        elif reclaim_end(reclaim, fate.state, fate.why, now):
            done[fate.state].append(reclaim.pk)
    tracked = {r.pod_uid for r in rows}
    new = [
        c
        for c in found.candidates
        if c.pod.uid and c.pod.uid not in tracked and not c.pod.opted_out
    ]
    for candidate in with_week_hours(found.policy, new) if new else []:
        if (made := _notice(pool, found.policy, candidate, now)) is not None:
            done[STATE.NOTICED].append(made.pk)
            if now >= made.grace_until:  # no grace: due at once
                _due(made, "no grace: a reclaim request waits to be filed")
                done[STATE.DUE].append(made.pk)


def _pools_of(uids: list[str]) -> dict[str, str]:
    """The pool each of these pods runs in now (one query, only for pods not seen here)."""
    if not uids:
        return {}
    live = GpuPod.objects.live().filter(uid__in=uids, phase=GpuPod.Phase.RUNNING, units__gt=0)
    return dict(live.values_list("uid", "pool_label"))


def _reporting(reclaims: list[Reclaim]) -> set[tuple[str, str]]:
    """Which of these pods have GPU series now; none when Prometheus cannot say."""
    if not reclaims:
        return set()
    pod, ns = settings.DCGM_POD_LABEL, settings.DCGM_NAMESPACE_LABEL
    found = instant({"reporting": pods_reporting_query(pod, ns, [r.pod for r in reclaims])})
    if not found.available:
        return set()
    return {(s.labels.get(ns, ""), s.labels.get(pod, "")) for s in found.series["reporting"]}


def _seen_idle(reclaim: Reclaim, now: datetime) -> None:
    """Idle since the last sweep that saw it: those hours more, but never more than two
    ticks' worth (a gap longer than that is time nobody saw it), a week at most."""
    gap = max((now - reclaim.last_seen_idle_at).total_seconds(), 0.0)
    gap = min(gap, 2 * settings.RECLAIM_TICK_SECONDS)
    hours = min(reclaim.idle_hours + gap / 3600, MAX_HOURS)
    Reclaim.objects.filter(pk=reclaim.pk).update(
        last_seen_idle_at=now, idle_hours=hours, gpu_hours=hours * reclaim.units
    )


def _notice(
    pool: Pool, policy: ReclaimPolicy, candidate: Candidate, now: datetime
) -> Reclaim | None:
    """A reclaim for a new candidate, and its owner told; None when another sweep made it a
    moment ago (one open reclaim per pod, kept by the database)."""
    pod = candidate.pod
    try:
        with transaction.atomic():
            reclaim = Reclaim.objects.create(
                pool=pool,
                namespace=pod.namespace,
                pod=pod.name,
                pod_uid=pod.uid,
                node_name=pod.node,
                units=pod.units,
                team=pod.team,
                contact=pod.contact,
                owner=pod.owner,
                idle_hours=candidate.idle_hours,
                gpu_hours=candidate.gpu_hours,
                noticed_at=now,
                grace_until=now + timedelta(hours=policy.grace_hours),
                last_seen_idle_at=now,
                reason=prefilled_reason(
                    candidate,
                    below_percent=policy.below_percent,
                    for_hours=policy.for_hours,
                    told_at=now,
                ),
            )
            audit(
                "reclaim.noticed",
                reclaim=reclaim,
                node_name=pod.node,
                message=f"{pod.namespace}/{pod.name}: idle {candidate.gpu_hours:g} GPU-hours; "
                f"its owner told, {policy.grace_hours} h of grace",
            )
            announce_reclaim_after_commit(reclaim.pk, "noticed")
    except IntegrityError:
        return None
    return reclaim


def _due(reclaim: Reclaim, why: str) -> None:
    with transaction.atomic():
        moved = Reclaim.objects.filter(pk=reclaim.pk, state=STATE.NOTICED).update(state=STATE.DUE)
        if moved:
            audit("reclaim.due", reclaim=reclaim, node_name=reclaim.node_name, message=why)
            announce_reclaim_after_commit(reclaim.pk, "due")
