"""What the pool numbers say: per-node metrics joined to the inventory, summed per pool (pure).

No Django here: rows in, figures out, so the rules (what counts as a free whole node, an idle
GPU, a node without monitoring) are tested fast and in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pools.metrics.results import InstantResult


@dataclass(frozen=True)
class NodeMetrics:
    gpus_reporting: int = 0
    util: float | None = None
    fb_used: float | None = None
    fb_total: float | None = None
    temp_max: float | None = None
    power: float | None = None
    xid_gpus: int = 0
    hot_gpus: int = 0
    idle_held_gpus: int = 0


@dataclass(frozen=True)
class NodeRow:
    name: str
    pool: str | None
    gpu_model: str
    gpus: int  # allocatable
    allocated: int
    ready: bool
    cordoned: bool
    drifted: bool
    metrics: NodeMetrics | None = None  # None: no DCGM series for this node

    @property
    def free(self) -> int:
        return max(0, self.gpus - self.allocated)

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.cordoned


@dataclass(frozen=True)
class PoolFigures:
    nodes: int = 0
    ready: int = 0
    not_ready: int = 0
    cordoned: int = 0
    gpus: int = 0
    allocated: int = 0
    free_whole_nodes: int = 0
    largest_free_block: int = 0
    drifted: int = 0
    metrics_available: bool = False
    avg_util: float | None = None
    fb_used: float = 0.0
    fb_total: float = 0.0
    xid_gpus: int = 0
    hot_gpus: int = 0
    idle_held_gpus: int = 0
    nodes_without_metrics: int = 0
    gpu_models: tuple[str, ...] = field(default_factory=tuple)

    @property
    def idle(self) -> int:
        return max(0, self.gpus - self.allocated)

    @property
    def fb_percent(self) -> float | None:
        return 100 * self.fb_used / self.fb_total if self.fb_total else None

    @property
    def allocated_percent(self) -> float:
        return 100 * self.allocated / self.gpus if self.gpus else 0.0


def node_metrics(result: InstantResult, node_label: str) -> dict[str, NodeMetrics]:
    """Per-node metrics from the batched queries (see queries.node_figure_queries)."""
    if not result.available:
        return {}
    by_node: dict[str, dict[str, float]] = {}
    for name, samples in result.series.items():
        for sample in samples:
            node = sample.labels.get(node_label)
            if node:
                by_node.setdefault(node, {})[name] = sample.value
    return {
        node: NodeMetrics(
            gpus_reporting=int(values.get("gpus_reporting", 0)),
            util=values.get("util"),
            fb_used=values.get("fb_used"),
            fb_total=values.get("fb_total"),
            temp_max=values.get("temp_max"),
            power=values.get("power"),
            xid_gpus=int(values.get("xid_gpus", 0)),
            hot_gpus=int(values.get("hot_gpus", 0)),
            idle_held_gpus=int(values.get("idle_held_gpus", 0)),
        )
        for node, values in by_node.items()
        if values.get("gpus_reporting")
    }


def pool_figures(rows: Iterable[NodeRow], *, metrics_available: bool) -> PoolFigures:
    nodes = ready = cordoned = gpus = allocated = whole = largest = drifted = 0
    util_weighted = util_gpus = 0.0
    fb_used = fb_total = 0.0
    xid = hot = idle_held = without = 0
    models: set[str] = set()
    for row in rows:
        nodes += 1
        ready += row.ready
        cordoned += row.cordoned
        gpus += row.gpus
        allocated += row.allocated
        drifted += row.drifted
        if row.gpu_model:
            models.add(row.gpu_model)
        if row.schedulable:
            # A gang job needs whole nodes: a node counts only when every GPU on it is free.
            whole += row.gpus > 0 and row.allocated == 0
            largest = max(largest, row.free)
        m = row.metrics
        if m is None:
            without += 1
            continue
        if m.util is not None:
            util_weighted += m.util * m.gpus_reporting
            util_gpus += m.gpus_reporting
        fb_used += m.fb_used or 0.0
        fb_total += m.fb_total or 0.0
        xid += m.xid_gpus
        hot += m.hot_gpus
        idle_held += m.idle_held_gpus
    return PoolFigures(
        nodes=nodes,
        ready=ready,
        not_ready=nodes - ready,
        cordoned=cordoned,
        gpus=gpus,
        allocated=allocated,
        free_whole_nodes=whole,
        largest_free_block=largest,
        drifted=drifted,
        metrics_available=metrics_available,
        avg_util=(util_weighted / util_gpus) if (metrics_available and util_gpus) else None,
        fb_used=fb_used,
        fb_total=fb_total,
        xid_gpus=xid,
        hot_gpus=hot,
        idle_held_gpus=idle_held,
        nodes_without_metrics=without if metrics_available else 0,
        gpu_models=tuple(sorted(models)),
    )


def group_by_pool(rows: Iterable[NodeRow]) -> Mapping[str | None, list[NodeRow]]:
    groups: dict[str | None, list[NodeRow]] = {}
    for row in rows:
        groups.setdefault(row.pool, []).append(row)
    return groups
