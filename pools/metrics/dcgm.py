"""The DCGM figures pages ask for besides the per-node batch (pools.metrics.node_figures):
one node's GPUs, and utilisation history. Each is a constant number of PromQL queries,
whatever the number of nodes."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from pools.core.figures import GpuRow, gpu_rows
from pools.metrics import queries, source
from pools.metrics.history import recorded_then_raw
from pools.metrics.results import RangeResult


def metric_labels() -> queries.MetricLabels:
    """Which Prometheus labels carry the node, the pod and its namespace here."""
    return queries.MetricLabels(
        node=settings.DCGM_NODE_LABEL,
        pod=settings.DCGM_POD_LABEL,
        namespace=settings.DCGM_NAMESPACE_LABEL,
    )


def node_gpus(node_name: str) -> tuple[list[GpuRow], str | None]:
    """The node's GPUs, one row each, and the error when Prometheus could not answer."""
    labels = metric_labels()
    result = source.instant({"gpus": queries.per_gpu_query(labels, node_name)})
    rows = gpu_rows(
        result.series.get("gpus", []),
        queries.GPU_ROW_FIELDS,
        pod_label=labels.pod,
        namespace_label=labels.namespace,
    )
    return rows, result.error


def utilisation_history(
    members: queries.Members,
    *,
    span: timedelta,
    step: timedelta,
    recorded: bool = False,
    now: datetime | None = None,
) -> RangeResult:
    """Average GPU utilisation over a pool's members (each while it was one), one point a
    step up to `now`; from the recording rules' per-node series when `recorded` (the node
    figures came from them), and before their first point from the raw series
    (pools.metrics.history)."""
    if not members:
        return RangeResult()
    labels = metric_labels()
    raw = queries.utilisation_history_query(labels, members)
    if not recorded:
        return source.history(raw, span=span, step=step, now=now)
    promql = queries.utilisation_history_query(labels, members, recorded=True)
    return recorded_then_raw(promql, raw, span=span, step=step, now=now)


def node_history(node_name: str, *, span: timedelta, step: timedelta) -> dict[str, RangeResult]:
    """The node's charts, one line per GPU (or MIG instance): utilisation, framebuffer
    used, temperature, power, XID errors."""
    return {
        name: source.history(promql, span=span, step=step, by=queries.DEVICE)
        for name, promql in queries.node_history_queries(metric_labels(), node_name).items()
    }
