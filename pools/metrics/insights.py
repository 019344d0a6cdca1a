"""The DCGM figures the pool insights read: utilisation per pool a step, XID errors a step,
driver versions and framebuffer peaks. A constant number of PromQL queries whatever the
number of pools and nodes.

Utilisation comes from the recording rules' per-node series (deploy/prometheus/rules.yml:
each node's average, GPU count and busiest GPU), so weeks of history cost a few points a
node rather than every raw sample; where the rules are not loaded (or the node label is not
theirs) the raw DCGM_FI_DEV_GPU_UTIL grouped by DCGM_NODE_LABEL stands in. The recorded
history starts when the rules were loaded: the part of the window before it is read from
the raw series (one more query, only while the rules are younger than the window)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pools.core.charts import chart_step
from pools.metrics import queries, source
from pools.metrics.dcgm import metric_labels
from pools.metrics.history import earliest, joined, raw_window

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


Points = list[tuple[float, float]]
Found = dict[str, dict[str, Points]]  # figure -> pool -> points


def _ranges(
    promqls: dict[str, str], span: timedelta, step: timedelta, end: datetime | None = None
) -> tuple[Found, str | None]:
    found: Found = {}
    error = None
    for name, promql in promqls.items():
        result = source.history_series(promql, span=span, step=step, now=end)
        error = error or result.error
        found[name] = {labels.get(queries.POOL_TAG, ""): points for labels, points in result.series}
    return found, error


def _before_recorded(
    found: Found, raw: dict[str, str], *, span: timedelta, step: timedelta, end: datetime | None
) -> tuple[Found, str | None]:
    """`found` (recorded) with the part of the span before the rules' first point read
    from the raw series, on the same step grid; unchanged when the rules cover the span."""
    first = earliest(found.get("average", {}))
    if first is None:
        return found, None
    window = raw_window(first, span=span, step=step, now=(end.timestamp() if end else time.time()))
    if window is None:
        return found, None
    earlier, error = _ranges(raw, window[0], step, window[1])
    figures = found.keys() | earlier.keys()
    return {f: joined(earlier.get(f, {}), found.get(f, {})) for f in figures}, error


def pool_series(
    pools: Mapping[str, queries.Members],
    *,
    span: timedelta,
    step: timedelta,
    end: datetime | None = None,
    never_idle: Collection[str] = (),
) -> PoolSeries:
    """Each pool's average utilisation and idle whole nodes a step over the `span` up to
    `end` (default now), over the nodes that were its members at each step: from the
    recorded series (before their first point, from the raw ones), or the raw ones when no
    recorded series answers. A node in `never_idle` (NotReady now) never counts as an idle
    whole node: it is down, and its exporter may still report its GPUs at 0 %."""
    wanted = {p: n for p, n in pools.items() if n}
    if not wanted:
        return PoolSeries()
    labels = metric_labels()
    raw = queries.pool_utilisation_queries(labels, wanted, never_idle)
    found: Found = {}
    error = None
    if labels.node == queries.RULES_NODE_LABEL:
        found, error = _ranges(
            queries.recorded_pool_utilisation_queries(wanted, never_idle), span, step, end
        )
    if error is None and not found.get("average"):
        found, error = _ranges(raw, span, step, end)
    elif error is None:
        found, error = _before_recorded(found, raw, span=span, step=step, end=end)
    return PoolSeries(found.get("average", {}), found.get("idle_nodes", {}), error)


# A new XID series shows at the exporter's next scrape: at most Prometheus's lookback (five
# minutes, the longest scrape interval its instant figures work with) after the error.
XID_SCRAPE_SLACK_SECONDS = 300.0


def xid_onsets(values: Mapping[float, float], step: float, first: float) -> list[float]:
    """The steps (sorted) by which a new XID error had appeared on one GPU: its last XID
    appeared or changed since the step before. At `first`, the window's first step, the
    error is older than the window. The same code again on the same GPU leaves no trace."""
    # Prometheus gives steps to the millisecond: compare them so.
    by_step = {round(t, 3): value for t, value in values.items()}
    return [
        t
        for t, value in sorted(by_step.items())
        if t >= first + step / 2 and by_step.get(round(t - step, 3)) != value
    ]


def xid_times(*, days: int) -> tuple[dict[str, list[float]], str | None]:
    """Each node's steps (sorted) by which a new XID error had appeared on one of its GPUs,
    over the last `days`: it appeared at most one step (window_span(days)) and one scrape
    (XID_SCRAPE_SLACK_SECONDS) before."""
    labels = metric_labels()
    span, step = window_span(days)
    began = time.time() - span.total_seconds()
    result = source.history_series(queries.xid_query(labels), span=span, step=step)
    onsets: dict[str, set[float]] = defaultdict(set)
    for series_labels, points in result.series:
        found = xid_onsets(dict(points), step.total_seconds(), began)
        onsets[series_labels.get(labels.node, "")].update(found)
    return {node: sorted(times) for node, times in onsets.items() if times}, result.error


def node_drivers() -> tuple[dict[str, str], str | None]:
    """Each node's driver version as the exporter reports it."""
    labels = metric_labels()
    result = source.instant({"drivers": queries.driver_query(labels)})
    return {
        s.labels.get(labels.node, ""): s.labels.get(queries.DRIVER_LABEL, "")
        for s in result.series.get("drivers", [])
    }, result.error


# The counters the readiness check wants from every GPU, by their names.
COUNTERS = tuple(dict.fromkeys(queries.COUNTER_KINDS.values()))


def counter_coverage() -> tuple[dict[str, dict[str, int]], str | None]:
    """Each node's GPUs reporting each counter the pages draw (queries.COUNTER_KINDS), by
    node then counter name: one PromQL query."""
    labels = metric_labels()
    result = source.instant({"coverage": queries.coverage_query(labels)})
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for s in result.series.get("coverage", []):
        kind = queries.COUNTER_KINDS.get(s.labels.get(queries.COUNTER_LABEL, ""))
        if kind is not None:
            # Whole GPUs' utilisation and MIG instances' engine activity add up.
            counts = found[s.labels.get(labels.node, "")]
            counts[kind] = counts.get(kind, 0) + int(s.value)
    return dict(found), result.error


def framebuffer_peaks(*, days: int) -> tuple[dict[str, float], str | None]:
    """Each workload pod's peak framebuffer use (MiB), by namespace/name."""
    labels = metric_labels()
    result = source.instant({"fb": queries.framebuffer_peaks_query(labels, days)})
    return {
        f"{s.labels.get(labels.namespace, '')}/{s.labels.get(labels.pod, '')}": s.value
        for s in result.series.get("fb", [])
    }, result.error
