"""Reclaims over time, the beat's part (every RECLAIM_TICK_SECONDS).

For each pool whose policy is on, the candidates are read: one PromQL query (their window),
plus the costly one (a week of idle hours in one-minute steps) only when there are new ones to
notice, and one SQL query. A followed pod's idle hours grow by the time between sweeps that
see it idle. A new candidate that has not opted out gets a reclaim: its owner is told and given
the policy's grace. An open reclaim goes on as its pod does: it ends when the pod works again,
goes away or opts out; once the grace is over it is due, and its prefilled request waits for
someone to file it. When Prometheus cannot answer, nothing is noticed and nothing ends: the
metrics decide, never their absence.

Then every approved reclaim is asked to evict (pools.reclaim.evict). Closing a pool's policy
cancels its open reclaims.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction

from pools.audit import audit
from pools.common.events import announce_reclaim_after_commit
from pools.core.reclaim import MAX_HOURS, Candidate, Seen, prefilled_reason, reclaim_fate
from pools.models import Pool, Reclaim, ReclaimPolicy
from pools.reclaim import pool_reclaim_candidates, with_week_hours
from pools.reclaim.evict import reclaim_evict

log = logging.getLogger(__name__)
STATE = Reclaim.State


def reclaims_advance(*, now: datetime) -> dict[str, list[int]]:
    """One sweep; the reclaims each step touched, by what happened to them."""
    done: dict[str, list[int]] = defaultdict(list)
    _cancel_where_policy_off(now, done)
    for pool in Pool.objects.active().filter(reclaim_policy__enabled=True):
        _sweep_pool(pool, now, done)
    approved = Reclaim.objects.filter(state=STATE.APPROVED, finished_at__isnull=True)
    for pk in approved.values_list("pk", flat=True):
        found = reclaim_evict(pk, now=now)
        if found is not None and found.state != STATE.APPROVED:
            done[found.state].append(pk)
    return dict(done)


def _cancel_where_policy_off(now: datetime, done: dict[str, list[int]]) -> None:
    on = ReclaimPolicy.objects.filter(enabled=True).values("pool_id")
    stale = Reclaim.objects.filter(finished_at__isnull=True).exclude(pool_id__in=on)
    for reclaim in stale.select_related("pool"):
        _finish(reclaim, STATE.CANCELLED, "the pool's reclaim policy was turned off", now)
        done[STATE.CANCELLED].append(reclaim.pk)


def _sweep_pool(pool: Pool, now: datetime, done: dict[str, list[int]]) -> None:
    found = pool_reclaim_candidates(pool, week_hours=False)
    if found.metrics_error:
        log.warning("reclaims of %s: nothing decided: %s", pool.name, found.metrics_error)
        return
    idle = {c.pod.uid: c for c in found.candidates}
    running = {p.uid: p for p in found.held}
    tracked = set()
    for reclaim in Reclaim.objects.filter(pool=pool, finished_at__isnull=True):
        tracked.add(reclaim.pod_uid)
        pod = running.get(reclaim.pod_uid)
        seen = Seen(pod is not None, reclaim.pod_uid in idle, bool(pod and pod.opted_out))
        if seen.idle:
            _seen_idle(reclaim, now)
        fate = reclaim_fate(reclaim.state, seen, grace_until=reclaim.grace_until, now=now)
        if fate is None:
            continue
        if fate.finished:
            _finish(reclaim, fate.state, fate.why, now)
        else:
            _due(reclaim, fate.why)
        done[fate.state].append(reclaim.pk)
    policy = found.policy
    new = [
        c
        for c in found.candidates
        if c.pod.uid and c.pod.uid not in tracked and not c.pod.opted_out
    ]
    for candidate in with_week_hours(policy, new) if new else []:
        if (made := _notice(pool, policy, candidate, now)) is not None:
            done[STATE.NOTICED].append(made.pk)
            if now >= made.grace_until:  # no grace: due at once
                _due(made, "no grace: a reclaim request waits to be filed")
                done[STATE.DUE].append(made.pk)


def _seen_idle(reclaim: Reclaim, now: datetime) -> None:
    """Idle since the last sweep that saw it: those hours more (a week at most, as counted)."""
    since = max((now - reclaim.last_seen_idle_at).total_seconds(), 0.0) / 3600
    hours = min(reclaim.idle_hours + since, MAX_HOURS)
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


def _finish(reclaim: Reclaim, state: str, why: str, now: datetime) -> None:
    with transaction.atomic():
        ended = Reclaim.objects.filter(pk=reclaim.pk, finished_at__isnull=True).update(
            state=state, finished_at=now, outcome=why
        )
        if ended:
            audit(
                f"reclaim.{state}" if state != STATE.REJECTED else "reclaim.closed",
                reclaim=reclaim,
                node_name=reclaim.node_name,
                message=f"{reclaim.namespace}/{reclaim.pod}: {why}",
            )
            if reclaim.requested_by_id is not None:
                announce_reclaim_after_commit(reclaim.pk, "ended")
