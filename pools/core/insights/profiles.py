"""Workload profiles (pure): per class of workload (namespace or team, and workload type),
what its pods ask for and how they behave, the first step before deciding to dedicate."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pools.core.insights.failures import Cause, XidErrors, ended_at, failures_in
from pools.core.insights.records import HistoryPod, Window
from pools.core.insights.stats import Spread, spread

GROUPINGS = ("namespace", "team")


@dataclass(frozen=True)
class Profile:
    owner: str  # the namespace or the team
    workload_type: str
    pods: int
    gpus_per_pod: Spread
    framebuffer_mib: tuple[float, float] | None  # (min, max) of each pod's peak; None: no data
    cpu_milli: Spread
    memory_bytes: Spread
    run_seconds: Spread
    concurrency_peak: int
    concurrency_typical: float | None  # the median over the window of pods running at once
    restarts: int
    failures: Mapping[Cause, int] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(self.failures.values())


def _owner(pod: HistoryPod, by: str) -> str:
    return (pod.team or pod.namespace) if by == "team" else pod.namespace


def concurrency(runs: list[tuple[float, float]], window: Window) -> tuple[int, float | None]:
    """Peak pods running at once, and the time-weighted median of the number running."""
    if not runs:
        return 0, None
    events = sorted([(s, 1) for s, _ in runs] + [(e, -1) for _, e in runs])
    level, last, peak = 0, window.start, 0
    time_at: Counter[int] = Counter()
    for at, step in events:
        time_at[level] += max(0.0, at - last)
        last = max(last, at)
        level += step
        peak = max(peak, level)
    time_at[level] += max(0.0, window.end - last)
    total, half, seen = sum(time_at.values()), sum(time_at.values()) / 2, 0.0
    for level_, seconds in sorted(time_at.items()):
        seen += seconds
        if seen >= half and total:
            return peak, float(level_)
    return peak, None


def _profile(
    owner: str,
    kind: str,
    pods: list[HistoryPod],
    window: Window,
    fb: Mapping[str, float],
    xids: XidErrors | None,
) -> Profile:
    runs = [
        (max(p.started, window.start), min(p.finished or window.end, window.end))
        for p in pods
        if p.started is not None
    ]
    peaks = [fb[p.key] for p in pods if p.key in fb]
    peak, typical = concurrency([r for r in runs if r[1] > r[0]], window)
    causes = Counter(cause for _, cause in failures_in(pods, window, xids))
    return Profile(
        owner=owner,
        workload_type=kind,
        pods=len(pods),
        gpus_per_pod=spread(p.gpus for p in pods),
        framebuffer_mib=(min(peaks), max(peaks)) if peaks else None,
        cpu_milli=spread(p.cpu_milli for p in pods),
        memory_bytes=spread(p.memory_bytes for p in pods),
        run_seconds=spread(
            p.finished - p.started for p in pods if p.started is not None and p.finished is not None
        ),
        concurrency_peak=peak,
        concurrency_typical=typical,
        restarts=sum(p.restarts for p in pods),
        failures={c: causes[c] for c in Cause if causes[c]},
    )


def workload_profiles(
    pods: Iterable[HistoryPod],
    window: Window,
    *,
    by: str = "namespace",
    framebuffer_peaks: Mapping[str, float] | None = None,
    xids: XidErrors | None = None,
) -> list[Profile]:
    """One profile per class, the classes with most pods first. A pod belongs to the window
    when it ran in it, was created in it or ended in it (as the failures count it).
    `framebuffer_peaks`: each pod's peak framebuffer use (MiB) by namespace/name, from
    Prometheus; `xids`: the XID errors that make a failure a GPU fault."""
    classes: dict[tuple[str, str], list[HistoryPod]] = defaultdict(list)
    for pod in pods:
        ran = pod.started is not None and window.clip(pod.started, pod.finished) > 0
        if ran or window.contains(pod.created) or window.contains(ended_at(pod)):
            classes[(_owner(pod, by), pod.workload_type)].append(pod)
    profiles = [
        _profile(owner, kind, members, window, framebuffer_peaks or {}, xids)
        for (owner, kind), members in classes.items()
    ]
    return sorted(profiles, key=lambda p: (-p.pods, p.owner, p.workload_type))
