"""Utilisation (pure): a pool's GPU utilisation over the window against its target, how
often whole nodes sat idle, and the gaps between jobs on its nodes.

A short average hides training peaks, so the p95 stands beside the mean; a pool long below
its target with clear gaps between jobs is over-dedicated."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pools.core.insights.records import HistoryPod, Window
from pools.core.insights.stats import Spread, percentile, spread
from pools.core.membership import ALL_ALONG, Span

# A pool whose jobs leave its nodes idle for an hour or more at a stretch (median) shows
# clear gaps between jobs.
CLEAR_GAP_SECONDS = 3600.0


@dataclass(frozen=True)
class UtilisationReport:
    target: float
    average: float | None = None  # percent, over the window's samples
    p95: float | None = None
    samples: int = 0
    idle_node_share: float | None = None  # share of the time with ≥ 1 idle whole node
    idle_nodes_mean: float | None = None
    gaps: Spread = field(default_factory=Spread)  # seconds between jobs on a node
    busy_share: float = 0.0  # node-time with at least one job running
    # From the pod history, whether or not Prometheus answers: the share of the time with a
    # node running no job, and the share of GPU-time pods held.
    empty_node_share: float = 0.0
    allocated_share: float = 0.0
    metrics_error: str | None = None

    @property
    def below_target(self) -> bool:
        return self.average is not None and self.average < self.target

    @property
    def from_metrics(self) -> bool:
        return self.average is not None

    @property
    def level(self) -> float:
        """Utilisation in percent; without metrics, the GPUs' allocation stands in (an upper
        bound: a GPU held is not always busy)."""
        return self.average if self.average is not None else 100 * self.allocated_share

    @property
    def idle_share(self) -> float:
        """Time with an idle whole node: measured, else a node running no job."""
        return self.idle_node_share if self.idle_node_share is not None else self.empty_node_share

    @property
    def clear_gaps(self) -> bool:
        return (self.gaps.p50 or 0.0) >= CLEAR_GAP_SECONDS

    @property
    def spiky(self) -> bool:
        """Peaks well above the average: a small average hides them."""
        if self.average is None or self.p95 is None:
            return False
        return self.p95 >= 50 and self.p95 >= 3 * max(self.average, 1.0)


def _merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


@dataclass(frozen=True)
class JobHistory:
    """What the pod history says of a pool's nodes over the window."""

    gaps: list[float]  # idle stretches between consecutive jobs on a node, seconds
    busy_share: float  # node-time with a job running
    empty_node_share: float  # time with at least one node running no job
    allocated_share: float  # GPU-time held by pods


def _clipped(start: float, end: float, spans: Sequence[Span]) -> list[tuple[float, float]]:
    """[start, end) cut to the spans (None: unbounded at that end)."""
    found = []
    for since, until in spans:
        s = start if since is None else max(start, since)
        e = end if until is None else min(end, until)
        if e > s:
            found.append((s, e))
    return found


def _runs(
    pods: Iterable[HistoryPod],
    wanted: Mapping[str, int],
    spans: Mapping[str, Sequence[Span]],
    window: Window,
) -> tuple[dict[str, list[tuple[float, float]]], float]:
    """Each node's runs while it was the pool's, and the GPU-seconds pods held there."""
    runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    held = 0.0
    for pod in pods:
        if pod.node not in wanted or pod.started is None or not pod.gpus:
            continue
        start = max(pod.started, window.start)
        end = min(pod.finished if pod.finished is not None else window.end, window.end)
        for s, e in _clipped(start, end, spans.get(pod.node, ALL_ALONG)):
            runs[pod.node].append((s, e))
            held += pod.gpus * (e - s)
    return runs, held


def _empty_share(
    merged: Iterable[list[tuple[float, float]]],
    members: Iterable[tuple[float, float]],
    window: Window,
) -> float:
    """Share of the window with fewer nodes running a job than the pool had (`members`:
    each node's time in the pool)."""
    events = sorted(
        [(e, 0, d) for runs in merged for s, t in runs for e, d in ((s, 1), (t, -1))]
        + [(e, 1, d) for s, t in members for e, d in ((s, 1), (t, -1))]
    )
    busy = count = 0
    last, full = window.start, 0.0
    for at, kind, step in events:
        if busy >= count:
            full += at - last
        last = at
        if kind == 0:
            busy += step
        else:
            count += step
    if busy >= count:
        full += window.end - last
    return 1 - full / window.seconds if window.seconds else 0.0


def job_history(
    pods: Iterable[HistoryPod],
    node_gpus: Mapping[str, int],
    window: Window,
    spans: Mapping[str, Sequence[Span]] | None = None,
) -> JobHistory:
    """`node_gpus`: the nodes that were the pool's over the window and their allocatable
    GPUs; `spans`: when each was (a node missing there, or spans None: all along)."""
    spans = spans or {}
    runs, held = _runs(pods, node_gpus, spans, window)
    merged = {node: _merged(intervals) for node, intervals in runs.items()}
    gaps = [b[0] - a[1] for m in merged.values() for a, b in itertools.pairwise(m)]
    busy = sum(end - start for m in merged.values() for start, end in m)
    member_time = {
        node: _clipped(window.start, window.end, spans.get(node, ALL_ALONG)) for node in node_gpus
    }
    seconds = {n: sum(e - s for s, e in times) for n, times in member_time.items()}
    node_time = sum(seconds.values())
    gpu_time = sum(gpus * seconds[n] for n, gpus in node_gpus.items())
    return JobHistory(
        gaps=gaps,
        busy_share=busy / node_time if node_time else 0.0,
        empty_node_share=_empty_share(
            merged.values(), [t for times in member_time.values() for t in times], window
        )
        if node_gpus
        else 0.0,
        allocated_share=held / gpu_time if gpu_time else 0.0,
    )


def idle_nodes_each_step(
    average_points: Sequence[tuple[float, float]],
    idle_node_points: Sequence[tuple[float, float]],
) -> list[tuple[float, float]]:
    """The idle whole nodes at every step the pool reported utilisation: a step with no idle
    node is missing from the count (the count of an empty set is no sample), so it is 0."""
    idle = dict(idle_node_points)
    return [(t, idle.get(t, 0.0)) for t, _ in average_points]


def utilisation_report(
    *,
    target: float,
    average_points: Sequence[tuple[float, float]],
    idle_node_points: Sequence[tuple[float, float]],
    pods: Iterable[HistoryPod],
    node_gpus: Mapping[str, int],
    window: Window,
    metrics_error: str | None = None,
    spans: Mapping[str, Sequence[Span]] | None = None,
) -> UtilisationReport:
    """`average_points`: the pool's average utilisation (percent) a step; `idle_node_points`:
    how many of its nodes had every GPU idle a step (a step with no idle node may be
    missing: the count of an empty set is no sample)."""
    values = sorted(v for _, v in average_points)
    history = job_history(pods, node_gpus, window, spans)
    samples = len(values)
    idle_steps = sum(1 for _, v in idle_node_points if v >= 1)
    return UtilisationReport(
        target=target,
        average=sum(values) / samples if samples else None,
        p95=percentile(values, 95),
        samples=samples,
        idle_node_share=idle_steps / samples if samples else None,
        idle_nodes_mean=sum(v for _, v in idle_node_points) / samples if samples else None,
        gaps=spread(history.gaps),
        busy_share=history.busy_share,
        empty_node_share=history.empty_node_share,
        allocated_share=history.allocated_share,
        metrics_error=metrics_error,
    )
