"""Reclaiming idle GPUs, the pure part: what a pool's policy may say, and the candidates
with their owners (the PromQL that finds them is pools.metrics.queries').

A pod is a candidate when it holds GPUs (whole ones, MIG instances) and its busiest GPU stayed
under the policy's threshold for the whole of its window: `max_over_time` of the utilisation
(`DCGM_FI_DEV_GPU_UTIL`, or 100 times `DCGM_FI_PROF_GR_ENGINE_ACTIVE` for a MIG instance) is
under it. The hours it has been held idle are counted over the last week, in one-minute
steps under the same threshold; its GPU-hours are those hours times the units it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_HOURS = 24 * 7


@dataclass(frozen=True)
class Policy:
    enabled: bool
    below_percent: float
    for_hours: int
    grace_hours: int


def policy_problems(policy: Policy) -> dict[str, str]:
    """Each field at fault and why (a 400)."""
    problems = {}
    if not 0 <= policy.below_percent <= 100:
        problems["below_percent"] = "A utilisation in per cent, from 0 to 100."
    if not 1 <= policy.for_hours <= MAX_HOURS:
        problems["for_hours"] = f"From 1 to {MAX_HOURS} hours."
    if not 0 <= policy.grace_hours <= MAX_HOURS:
        problems["grace_hours"] = f"From 0 to {MAX_HOURS} hours."
    return problems


@dataclass(frozen=True)
class HeldPod:
    namespace: str
    name: str
    node: str
    units: int  # GPUs, MIG instances, shares it holds
    team: str
    contact: str
    opted_out: bool
    owner: str  # "Job ml-training/finetune", or ""


@dataclass(frozen=True)
class Candidate:
    pod: HeldPod
    idle_hours: float  # over the last week, under the threshold
    gpu_hours: float

    def as_dict(self) -> dict[str, object]:
        p = self.pod
        return {
            "namespace": p.namespace,
            "pod": p.name,
            "node": p.node,
            "units": p.units,
            "team": p.team,
            "contact": p.contact,
            "owner": p.owner,
            "opted_out": p.opted_out,
            "idle_hours": round(self.idle_hours, 2),
            "gpu_hours": round(self.gpu_hours, 2),
        }


def reclaim_candidates(
    pods: Sequence[HeldPod],
    idle: set[tuple[str, str]],
    idle_hours: Mapping[tuple[str, str], float],
    *,
    for_hours: int,
) -> list[Candidate]:
    """The pods of `pods` found idle for the window, the most GPU-hours first; an opted-out
    pod is listed (and says so), never reclaimed."""
    found = []
    for pod in pods:
        key = (pod.namespace, pod.name)
        if key not in idle:
            continue
        hours = max(idle_hours.get(key, 0.0), float(for_hours))
        found.append(Candidate(pod, hours, hours * pod.units))
    return sorted(found, key=lambda c: (-c.gpu_hours, c.pod.namespace, c.pod.name))


@dataclass(frozen=True)
class TeamIdle:
    team: str
    gpu_hours_7d: float
    gpu_hours_30d: float
    pods: int


def team_idle_hours(
    pods: Sequence[HeldPod],
    week: Mapping[tuple[str, str], float],
    month: Mapping[tuple[str, str], float],
) -> list[TeamIdle]:
    """Held-idle GPU-hours per team over 7 and 30 days, the most first; pods without a team
    label count under their namespace ("namespace ml-serving")."""
    totals: dict[str, list[float]] = {}
    for pod in pods:
        key = (pod.namespace, pod.name)
        if key not in week and key not in month:
            continue
        team = pod.team or f"namespace {pod.namespace}"
        row = totals.setdefault(team, [0.0, 0.0, 0])
        row[0] += week.get(key, 0.0) * pod.units
        row[1] += month.get(key, 0.0) * pod.units
        row[2] += 1
    return sorted(
        (TeamIdle(team, round(w, 2), round(m, 2), int(n)) for team, (w, m, n) in totals.items()),
        key=lambda t: (-t.gpu_hours_30d, t.team),
    )
