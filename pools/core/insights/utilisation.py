"""Utilisation (pure): a pool's GPU utilisation over the window against its target, how
often whole nodes sat idle, and the gaps between jobs on its nodes.

A short average hides training peaks, so the p95 stands beside the mean; a pool long below
its target with clear gaps between jobs is over-dedicated."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pools.core.insights.records import PodRecord, Window
from pools.core.insights.stats import Spread, percentile, spread

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
    metrics_error: str | None = None

    @property
    def below_target(self) -> bool:
        return self.average is not None and self.average < self.target

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


def job_gaps(
    pods: Iterable[PodRecord], node_names: Sequence[str], window: Window
) -> tuple[list[float], float]:
    """The idle stretches between consecutive jobs on each node (seconds), and the share of
    node-time with a job running, over the window."""
    runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    wanted = set(node_names)
    for pod in pods:
        if pod.node not in wanted or pod.started is None or not pod.gpus:
            continue
        start = max(pod.started, window.start)
        end = min(pod.finished if pod.finished is not None else window.end, window.end)
        if end > start:
            runs[pod.node].append((start, end))
    gaps: list[float] = []
    busy = 0.0
    for intervals in runs.values():
        merged = _merged(intervals)
        busy += sum(end - start for start, end in merged)
        gaps.extend(b[0] - a[1] for a, b in itertools.pairwise(merged))
    total = window.seconds * len(wanted)
    return gaps, (busy / total if total else 0.0)


def utilisation_report(
    *,
    target: float,
    average_points: Sequence[tuple[float, float]],
    idle_node_points: Sequence[tuple[float, float]],
    pods: Iterable[PodRecord],
    node_names: Sequence[str],
    window: Window,
    metrics_error: str | None = None,
) -> UtilisationReport:
    """`average_points`: the pool's average utilisation (percent) a step; `idle_node_points`:
    how many of its nodes had every GPU idle a step (a step with no idle node may be
    missing: the count of an empty set is no sample)."""
    values = sorted(v for _, v in average_points)
    gaps, busy = job_gaps(pods, node_names, window)
    samples = len(values)
    idle_steps = sum(1 for _, v in idle_node_points if v >= 1)
    return UtilisationReport(
        target=target,
        average=sum(values) / samples if samples else None,
        p95=percentile(values, 95),
        samples=samples,
        idle_node_share=idle_steps / samples if samples else None,
        idle_nodes_mean=sum(v for _, v in idle_node_points) / samples if samples else None,
        gaps=spread(gaps),
        busy_share=busy,
        metrics_error=metrics_error,
    )
