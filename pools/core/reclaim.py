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
from datetime import datetime

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
    uid: str = ""


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


# A reclaim's states (pools.models.Reclaim.State), named here so the pure rules below need no
# model.
NOTICED, DUE, REQUESTED, APPROVED, REJECTED = "noticed", "due", "requested", "approved", "rejected"
EVICTED, RECOVERED, OPTED_OUT, FAILED = "evicted", "recovered", "opted_out", "failed"
CANCELLED = "cancelled"


@dataclass(frozen=True)
class Seen:
    """What the sweep sees now of a pod a reclaim follows."""

    running: bool  # still running in the pool, holding GPU units
    idle: bool  # still a candidate under the policy
    opted_out: bool
    reporting: bool = True  # it has GPU series: "not idle" means it worked
    moved_to: str = ""  # the pool it now runs in, when another


@dataclass(frozen=True)
class Fate:
    state: str
    why: str
    finished: bool = True


def reclaim_fate(state: str, seen: Seen, *, grace_until: datetime, now: datetime) -> Fate | None:
    """What becomes of an open reclaim at a sweep that could read the metrics; None: it stays.
    An approved one whose pod went away is the eviction step's to find (the API says 404). A
    pod without GPU series tells nothing: nothing is decided on missing metrics."""
    if seen.moved_to:
        return Fate(CANCELLED, f"its node moved to the pool {seen.moved_to}: not reclaimed here")
    if seen.opted_out and seen.running:
        return Fate(OPTED_OUT, "its owner annotated it never to be reclaimed")
    if not seen.running:
        if state == APPROVED:
            return None
        return Fate(RECOVERED if state != REJECTED else REJECTED, "the pod went away")
    if not seen.idle:
        if not seen.reporting:
            return None
        if state == REJECTED:
            return Fate(REJECTED, "it worked again: it will be noticed afresh if it idles again")
        return Fate(RECOVERED, "it worked again before its eviction")
    if state == NOTICED and now >= grace_until:
        return Fate(DUE, "the grace is over: a reclaim request waits to be filed", False)
    return None


def prefilled_reason(
    candidate: Candidate, *, below_percent: float, for_hours: int, told_at: datetime
) -> str:
    """What the prefilled request says: the evidence and that the owner was told."""
    p = candidate.pod
    return (
        f"{p.namespace}/{p.name} held {p.units} GPU unit{'' if p.units == 1 else 's'} on "
        f"{p.node} under {below_percent:g} % for {for_hours} h or more "
        f"({candidate.gpu_hours:g} GPU-hours idle over the last week); its owner "
        f"({owner_words(p)}) was told at {told_at:%Y-%m-%d %H:%M} UTC."
    )


def owner_words(pod: HeldPod) -> str:
    words = [f"team {pod.team}" if pod.team else f"namespace {pod.namespace}"]
    if pod.contact:
        words.append(pod.contact)
    return ", ".join(words)
