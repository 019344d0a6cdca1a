"""The DCGM figures the pool insights read: utilisation per pool a step, XID errors a step,
driver versions and framebuffer peaks. A constant number of PromQL queries whatever the
number of pools and nodes.

Utilisation comes from the recording rules' per-node series (deploy/prometheus/rules.yml:
each node's average, GPU count and busiest GPU), so weeks of history cost a few points a
node rather than every raw sample; where the rules are not loaded (or the node label is not
theirs) the raw DCGM_FI_DEV_GPU_UTIL grouped by DCGM_NODE_LABEL stands in. The recorded
history starts when the rules were loaded."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from pools.core.charts import chart_step
from pools.metrics import queries, source
from pools.metrics.dcgm import metric_labels

# The indicators read a window's history at a constant number of points, as a chart does
# (at least a point an hour over 30 days: every 14 min over 7 days, every 3 h over 90).
INDICATOR_POINTS = 720


@dataclass(frozen=True)
class PoolSeries:
    average: Mapping[str, list[tuple[float, float]]] = field(default_factory=dict)
    idle_nodes: Mapping[str, list[tuple[float, float]]] = field(default_factory=dict)
    error: str | None = None


def window_span(days: int) -> tuple[timedelta, timedelta]:
    """The span of a window of `days` and the step the indicators read it at."""
    span = timedelta(days=days)
    return span, chart_step(span, INDICATOR_POINTS)


Ranges = dict[str, dict[str, list[tuple[float, float]]]]


def _ranges(promqls: dict[str, str], span: timedelta, step: timedelta) -> tuple[Ranges, str | None]:
    found: Ranges = {}
    error = None
    for name, promql in promqls.items():
        result = source.history_series(promql, span=span, step=step)
        error = error or result.error
        found[name] = {labels.get(queries.POOL_TAG, ""): points for labels, points in result.series}
    return found, error


def pool_series(pools: dict[str, list[str]], *, span: timedelta, step: timedelta) -> PoolSeries:
    """Each pool's average utilisation and idle whole nodes a step over the last `span`:
    from the recorded series, or the raw ones when no recorded series answers."""
    wanted = {p: n for p, n in pools.items() if n}
    if not wanted:
        return PoolSeries()
    labels = metric_labels()
    found: Ranges = {}
    error = None
    if labels.node == queries.RULES_NODE_LABEL:
        found, error = _ranges(queries.recorded_pool_utilisation_queries(wanted), span, step)
    if error is None and not found.get("average"):
        found, error = _ranges(queries.pool_utilisation_queries(labels, wanted), span, step)
    return PoolSeries(found.get("average", {}), found.get("idle_nodes", {}), error)


def xid_times(*, days: int) -> tuple[dict[str, list[float]], str | None]:
    """Each node's times (sorted) with an XID error reported, over the last `days`."""
    labels = metric_labels()
    span, step = window_span(days)
    result = source.history_series(queries.xid_query(labels), span=span, step=step)
    times: dict[str, list[float]] = defaultdict(list)
    for series_labels, points in result.series:
        times[series_labels.get(labels.node, "")].extend(t for t, _ in points)
    return {node: sorted(ts) for node, ts in times.items()}, result.error


def node_drivers() -> tuple[dict[str, str], str | None]:
    """Each node's driver version as the exporter reports it."""
    labels = metric_labels()
    result = source.instant({"drivers": queries.driver_query(labels)})
    return {
        s.labels.get(labels.node, ""): s.labels.get(queries.DRIVER_LABEL, "")
        for s in result.series.get("drivers", [])
    }, result.error


def framebuffer_peaks(*, days: int) -> tuple[dict[str, float], str | None]:
    """Each workload pod's peak framebuffer use (MiB), by namespace/name."""
    labels = metric_labels()
    result = source.instant({"fb": queries.framebuffer_peaks_query(labels, days)})
    return {
        f"{s.labels.get(labels.namespace, '')}/{s.labels.get(labels.pod, '')}": s.value
        for s in result.series.get("fb", [])
    }, result.error
