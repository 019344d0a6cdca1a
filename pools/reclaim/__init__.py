"""Reclaiming idle GPUs: a pool's policy (off by default), the pods that hold GPUs and do
nothing under it, with their owners, and the held-idle GPU-hours of each team.

What happens to a candidate is in the modules beside: the beat's sweep tells its owner and
ends the grace (sweep), people file and decide the prefilled request (requests), and the
worker evicts an approved one through the eviction API (evict)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from pools.audit import audit
from pools.common.errors import InvalidInput, NotAllowed
from pools.common.roles import Capability, has_capability
from pools.core.insights.queueing import GANG_OWNERS
from pools.core.reclaim import (
    Candidate,
    HeldPod,
    Policy,
    TeamIdle,
    policy_problems,
    reclaim_candidates,
    team_idle_hours,
)
from pools.metrics.queries import idle_hours_query, idle_pods_query
from pools.metrics.source import instant
from pools.models import GpuPod, Pool, ReclaimPolicy
from pools.reclaim.ending import pool_reclaims_cancel

log = logging.getLogger(__name__)
WEEK_DAYS, MONTH_DAYS = 7, 30
HELD_IDLE_PERCENT = 1.0  # the teams' view: held and doing nothing, as everywhere else


def reclaim_policy_of(pool: Pool) -> ReclaimPolicy:
    """The pool's policy, or the default one (off) when none was set."""
    found = ReclaimPolicy.objects.filter(pool=pool).first()
    return found or ReclaimPolicy(pool=pool)


def reclaim_policy_set(
    *,
    pool: Pool,
    user: AbstractBaseUser,
    enabled: bool,
    below_percent: float,
    for_hours: int,
    grace_hours: int,
) -> ReclaimPolicy:
    """Pool admins; a 400 naming each bad field, nothing written; audited."""
    if not has_capability(user, Capability.EDIT_POOLS):
        raise NotAllowed("forbidden", "Only pool admins set a reclaim policy.")
    asked = Policy(enabled, below_percent, for_hours, grace_hours)
    if problems := policy_problems(asked):
        raise InvalidInput("validation", " ".join(problems.values()), problems)
    with transaction.atomic():
        before = reclaim_policy_of(pool)
        was = _described(before) if before.pk else "none"
        policy, _ = ReclaimPolicy.objects.update_or_create(
            pool=pool,
            defaults={
                "enabled": enabled,
                "below_percent": below_percent,
                "for_hours": for_hours,
                "grace_hours": grace_hours,
                "updated_by": user,
            },
        )
        audit(
            "reclaim.policy_set",
            actor=user,
            message=f"{pool.name}: {_described(policy)} (was {was})",
        )
        if not enabled:  # at once, not at the next sweep: an approval must not evict now
            pool_reclaims_cancel(pool, "the pool's reclaim policy was turned off", timezone.now())
    return policy


def _described(policy: ReclaimPolicy) -> str:
    state = "on" if policy.enabled else "off"
    return (
        f"{state}, held under {policy.below_percent:g} % for {policy.for_hours} h, "
        f"{policy.grace_hours} h of grace"
    )


def _held(pods: object) -> list[HeldPod]:
    return [
        HeldPod(
            namespace,
            name,
            node,
            units,
            team,
            contact,
            opted_out,
            f"{kind} {namespace}/{owner}" if kind in GANG_OWNERS and owner else "",
            uid,
        )
        for namespace, name, node, units, team, contact, opted_out, kind, owner, uid in pods  # type: ignore[attr-defined]
    ]


_POD_COLUMNS = (
    "namespace",
    "name",
    "node_name",
    "units",
    "team",
    "contact",
    "reclaim_opt_out",
    "owner_kind",
    "owner_name",
    "uid",
)


def _by_pod(samples: list) -> dict[tuple[str, str], float]:  # type: ignore[type-arg]
    ns, pod = settings.DCGM_NAMESPACE_LABEL, settings.DCGM_POD_LABEL
    return {(s.labels.get(ns, ""), s.labels.get(pod, "")): s.value for s in samples}


@dataclass(frozen=True)
class PoolCandidates:
    policy: ReclaimPolicy
    candidates: list[Candidate]
    metrics_error: str | None = None
    held: list[HeldPod] = field(default_factory=list)  # every running pod holding units


def pool_reclaim_candidates(pool: Pool, *, week_hours: bool = True) -> PoolCandidates:
    """The pool's running pods that hold GPU units and sat idle under its policy: two PromQL
    queries (one without `week_hours`: each candidate then counts its window's hours) and one
    SQL query, whatever the number of pods. None when the policy is off."""
    policy = reclaim_policy_of(pool)
    if not policy.enabled:
        return PoolCandidates(policy, [])
    pod, ns = settings.DCGM_POD_LABEL, settings.DCGM_NAMESPACE_LABEL
    queries = {"idle": idle_pods_query(pod, ns, policy.for_hours, policy.below_percent)}
    if week_hours:
        queries["hours"] = idle_hours_query(pod, ns, WEEK_DAYS, policy.below_percent)
    found = instant(queries)
    if not found.available:
        return PoolCandidates(policy, [], found.error)
    idle = set(_by_pod(found.series.get("idle", [])))
    pods = GpuPod.objects.live().filter(
        pool_label=pool.name, phase=GpuPod.Phase.RUNNING, units__gt=0
    )
    held = _held(pods.values_list(*_POD_COLUMNS))
    hours = _by_pod(found.series.get("hours", []))
    found_candidates = reclaim_candidates(held, idle, hours, for_hours=policy.for_hours)
    return PoolCandidates(policy, found_candidates, held=held)


def with_week_hours(policy: ReclaimPolicy, candidates: list[Candidate]) -> list[Candidate]:
    """`candidates` with their idle hours over the last week (one PromQL query, the costly
    one: a week in one-minute steps); as they were when Prometheus cannot answer."""
    pod, ns = settings.DCGM_POD_LABEL, settings.DCGM_NAMESPACE_LABEL
    found = instant({"hours": idle_hours_query(pod, ns, WEEK_DAYS, policy.below_percent)})
    if not found.available:
        return candidates
    hours = _by_pod(found.series.get("hours", []))
    idle = {(c.pod.namespace, c.pod.name) for c in candidates}
    pods = [c.pod for c in candidates]
    return reclaim_candidates(pods, idle, hours, for_hours=policy.for_hours)


def teams_idle(*, now: datetime) -> tuple[list[TeamIdle], str | None]:
    """Held-idle GPU-hours (under 1 %) per team over 7 and 30 days: two PromQL queries and
    one SQL query; or why there are none."""
    pod, ns = settings.DCGM_POD_LABEL, settings.DCGM_NAMESPACE_LABEL
    found = instant(
        {
            "week": idle_hours_query(pod, ns, WEEK_DAYS, HELD_IDLE_PERCENT),
            "month": idle_hours_query(pod, ns, MONTH_DAYS, HELD_IDLE_PERCENT),
        }
    )
    if not found.available:
        return [], found.error
    since = now - timedelta(days=MONTH_DAYS)
    pods = GpuPod.objects.filter(units__gt=0).filter(
        Q(deleted_at__isnull=True) | Q(deleted_at__gte=since)
    )
    held = _held(pods.values_list(*_POD_COLUMNS))
    week = _by_pod(found.series.get("week", []))
    month = _by_pod(found.series.get("month", []))
    positive = {k: v for k, v in week.items() if v > 0}, {k: v for k, v in month.items() if v > 0}
    return team_idle_hours(held, *positive), None
