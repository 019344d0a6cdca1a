"""What the pool numbers say: per-node metrics joined to the inventory, summed per pool (pure).

Rows in, figures out, so the rules (what counts as a free whole node, an unallocated GPU, a
GPU held but idle, a node without monitoring, a healthy node) are tested fast and in one
place. Query results arrive as plain (labels, value) pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# One series sample: its labels and its value (pools.metrics.results.Sample is one).
LabelledValue = tuple[Mapping[str, str], float]


# NodeMetrics and NodeRow are built for every node on a cold page (15,000 of each) and
# never changed after: plain slotted dataclasses build six times faster than frozen ones,
# whose every field is set through object.__setattr__.
@dataclass(slots=True)
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


@dataclass(slots=True)
class NodeRow:
    name: str
    pool: str | None
    gpu_model: str
    gpus: int  # allocatable whole GPUs: a MIG instance or a shared replica is not one
    allocated: int  # of them, held by pods
    ready: bool
    cordoned: bool
    drifted: bool
    metrics: NodeMetrics | None = None  # None: no DCGM series for this node
    physical: int = -1  # physical GPUs (-1: as many as `gpus`)
    # Every other kind of unit the node offers: (its label, allocatable, allocated).
    units: tuple[tuple[str, int, int], ...] = ()

    @property
    def physical_gpus(self) -> int:
        return self.gpus if self.physical < 0 else self.physical

    @property
    def unallocated(self) -> int:
        """GPUs no pod holds on this node (whether or not it accepts pods now)."""
        return max(0, self.gpus - self.allocated)

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.cordoned


@dataclass(frozen=True)
class UnitFigures:
    """One kind of unit over a set of nodes (MIG instances of a profile, shared GPUs), the
    way PoolFigures counts whole GPUs."""

    label: str  # pools.core.devices.UnitKind.label
    units: int = 0
    allocated: int = 0
    unallocated: int = 0  # free on nodes that take pods now
    unschedulable: int = 0  # free on NotReady or cordoned nodes
    largest_free_block: int = 0  # most free on one node that takes pods
    whole_free_nodes: int = 0  # nodes that take pods with none of them held

    def plus(self, other: UnitFigures) -> UnitFigures:
        return UnitFigures(
            self.label,
            self.units + other.units,
            self.allocated + other.allocated,
            self.unallocated + other.unallocated,
            self.unschedulable + other.unschedulable,
            max(self.largest_free_block, other.largest_free_block),
            self.whole_free_nodes + other.whole_free_nodes,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.label,
            "units": self.units,
            "allocated": self.allocated,
            "unallocated": self.unallocated,
            "unschedulable": self.unschedulable,
            "largest_free_block": self.largest_free_block,
            "whole_free_nodes": self.whole_free_nodes,
        }


def unit_figures(rows: Iterable[NodeRow]) -> tuple[UnitFigures, ...]:
    """Each kind of unit other than whole GPUs over `rows`, by its label."""
    by_label: dict[str, UnitFigures] = {}
    for row in rows:
        for label, units, allocated in row.units:
            free = max(units - allocated, 0)
            usable = row.schedulable
            one = UnitFigures(
                label,
                units,
                allocated,
                free if usable else 0,
                0 if usable else free,
                free if usable else 0,
                int(usable and units > 0 and allocated == 0),
            )
            known = by_label.get(label)
            by_label[label] = one if known is None else known.plus(one)
    return tuple(by_label[label] for label in sorted(by_label))


def _merged_units(parts: Iterable[tuple[UnitFigures, ...]]) -> tuple[UnitFigures, ...]:
    by_label: dict[str, UnitFigures] = {}
    for units in parts:
        for one in units:
            known = by_label.get(one.label)
            by_label[one.label] = one if known is None else known.plus(one)
    return tuple(by_label[label] for label in sorted(by_label))


@dataclass(frozen=True)
class PoolFigures:
    nodes: int = 0
    ready: int = 0
    not_ready: int = 0
    cordoned: int = 0
    gpus: int = 0
    allocated: int = 0
    # Every GPU is one of: allocated (a pod holds it), unallocated (free on a node that
    # takes pods now), or unschedulable (free, on a NotReady or cordoned node).
    unallocated: int = 0
    unschedulable_gpus: int = 0
    unschedulable_nodes: int = 0
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
    # The GPUs avg_util averages over: what merging figures weighs it by.
    util_gpus: float = 0.0
    # Physical GPUs, whatever they are split or shared into; `gpus` above counts whole GPUs
    # only, and each other kind of unit is counted apart in `units`.
    physical_gpus: int = 0
    units: tuple[UnitFigures, ...] = ()

    @property
    def fb_percent(self) -> float | None:
        return 100 * self.fb_used / self.fb_total if self.fb_total else None

    @property
    def allocated_percent(self) -> float:
        return 100 * self.allocated / self.gpus if self.gpus else 0.0


_METRIC_FIELDS = [f.name for f in fields(NodeMetrics)]
_COUNT_FIELDS = frozenset({"gpus_reporting", "xid_gpus", "hot_gpus", "idle_held_gpus"})
_DEFAULT_ROW = [0 if name in _COUNT_FIELDS else None for name in _METRIC_FIELDS]


# One figure's answer: (node, value) pairs; a node of None is a sample without the node
# label (the recording rules' markers), which counts for no node.
NodeValues = Iterable[tuple[str | None, float]]


def node_metric_rows(values: Mapping[str, NodeValues]) -> dict[str, tuple[Any, ...]]:
    """Per node, NodeMetrics' fields in order as a tuple (NodeMetrics(*row) rebuilds it),
    from each figure's (node, value) pairs (pools.metrics.queries' node_figure_queries);
    nodes with no GPU reporting are left out, so a missing node means "no DCGM series".
    Tuples, not objects: at 15,000 nodes building and caching NodeMetrics instances cost
    more than reading Prometheus' answer."""
    index = {name: i for i, name in enumerate(_METRIC_FIELDS)}
    by_node: dict[str | None, list[Any]] = {}
    default = _DEFAULT_ROW
    for name, pairs in values.items():
        at = index.get(name)
        if at is None:
            continue
        for node, value in pairs:
            row = by_node.get(node)
            if row is None:
                row = by_node[node] = default.copy()
            row[at] = value
    by_node.pop(None, None)
    by_node.pop("", None)
    counts = [index[name] for name in _COUNT_FIELDS]
    reporting = index["gpus_reporting"]
    rows: dict[str, tuple[Any, ...]] = {}
    for node, row in by_node.items():
        if row[reporting]:
            for at in counts:
                row[at] = int(row[at])
            rows[node] = tuple(row)  # type: ignore[index]
    return rows


def node_metrics_from_series(
    series: Mapping[str, Iterable[LabelledValue]], node_label: str
) -> dict[str, NodeMetrics]:
    """node_metric_rows, as NodeMetrics, from labelled samples keyed by `node_label`."""
    values = {
        name: [(labels.get(node_label), value) for labels, value in samples]
        for name, samples in series.items()
    }
    return {node: NodeMetrics(*row) for node, row in node_metric_rows(values).items()}


def _metric_sums(metrics: Iterable[NodeMetrics | None], *, available: bool) -> dict[str, Any]:
    """The metric half of a pool's figures, summed over its nodes' metrics."""
    util_weighted = util_gpus = fb_used = fb_total = 0.0
    xid = hot = idle_held = without = 0
    for m in metrics:
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
    return {
        "metrics_available": available,
        "avg_util": (util_weighted / util_gpus) if (available and util_gpus) else None,
        "fb_used": fb_used,
        "fb_total": fb_total,
        "xid_gpus": xid,
        "hot_gpus": hot,
        "idle_held_gpus": idle_held,
        "nodes_without_metrics": without if available else 0,
        "util_gpus": util_gpus if available else 0.0,
    }


def pool_figures(rows: Iterable[NodeRow], *, metrics_available: bool) -> PoolFigures:
    rows = list(rows)
    nodes = ready = cordoned = gpus = allocated = whole = largest = drifted = 0
    unallocated = unschedulable_gpus = unschedulable_nodes = 0
    models: set[str] = set()
    physical = 0
    for row in rows:
        nodes += 1
        ready += row.ready
        cordoned += row.cordoned
        gpus += row.gpus
        physical += row.physical_gpus
        allocated += row.allocated
        drifted += row.drifted
        if row.gpu_model:
            models.add(row.gpu_model)
        free = row.unallocated
        if row.schedulable:
            # A gang job needs whole nodes: a node counts only when every GPU on it is free.
            whole += row.gpus > 0 and row.allocated == 0
            largest = max(largest, free)
            unallocated += free
        else:
            # Free, but no pod lands there: apart, as "largest free block" leaves them out.
            unschedulable_nodes += 1
            unschedulable_gpus += free
    return PoolFigures(
        nodes=nodes,
        ready=ready,
        not_ready=nodes - ready,
        cordoned=cordoned,
        gpus=gpus,
        allocated=allocated,
        unallocated=unallocated,
        unschedulable_gpus=unschedulable_gpus,
        unschedulable_nodes=unschedulable_nodes,
        free_whole_nodes=whole,
        largest_free_block=largest,
        drifted=drifted,
        gpu_models=tuple(sorted(models)),
        physical_gpus=physical,
        units=unit_figures(rows),
        **_metric_sums((row.metrics for row in rows), available=metrics_available),
    )


_SUMMED = (
    "nodes",
    "ready",
    "not_ready",
    "cordoned",
    "gpus",
    "allocated",
    "unallocated",
    "unschedulable_gpus",
    "unschedulable_nodes",
    "free_whole_nodes",
    "drifted",
    "fb_used",
    "fb_total",
    "xid_gpus",
    "hot_gpus",
    "idle_held_gpus",
    "nodes_without_metrics",
    "util_gpus",
    "physical_gpus",
)


def merge_figures(parts: Iterable[PoolFigures], *, metrics_available: bool) -> PoolFigures:
    """The figures of the union of disjoint sets of nodes, from each set's figures: what
    pool_figures over all their rows gives, without a second pass over the rows."""
    parts = list(parts)
    totals = {name: sum(getattr(p, name) for p in parts) for name in _SUMMED}
    weighted = sum((p.avg_util or 0.0) * p.util_gpus for p in parts)
    util_gpus = totals["util_gpus"]
    return PoolFigures(
        **totals,
        largest_free_block=max((p.largest_free_block for p in parts), default=0),
        metrics_available=metrics_available,
        avg_util=(weighted / util_gpus) if (metrics_available and util_gpus) else None,
        gpu_models=tuple(sorted({m for p in parts for m in p.gpu_models})),
        units=_merged_units(p.units for p in parts),
    )


def group_by_pool(rows: Iterable[NodeRow]) -> Mapping[str | None, list[NodeRow]]:
    groups: dict[str | None, list[NodeRow]] = {}
    for row in rows:
        groups.setdefault(row.pool, []).append(row)
    return groups


# The health filter of the pool page and the API: key -> what it shows.
HEALTH = {
    "xid": "XID errors",
    "hot": "hot GPUs",
    "no-metrics": "no DCGM metrics",
    "idle-held": "held but idle",
    "healthy": "healthy",
}


def health_matches(m: NodeMetrics | None, health: str) -> bool:
    """Whether a node's figures (None: no DCGM series) fall under a HEALTH filter."""
    return {
        "xid": bool(m and m.xid_gpus),
        "hot": bool(m and m.hot_gpus),
        "no-metrics": m is None,
        "idle-held": bool(m and m.idle_held_gpus),
        "healthy": bool(m and not m.xid_gpus and not m.hot_gpus),
    }[health]


@dataclass(frozen=True)
class GpuRow:
    index: str  # the GPU's index, and " instance N" for a MIG instance of it
    util: float | None = None
    fb_used: float | None = None
    fb_total: float | None = None
    temp: float | None = None
    power: float | None = None
    sm_clock: float | None = None
    xid: int = 0
    pod: str = ""
    namespace: str = ""
    profile: str = ""  # the MIG instance's profile (GPU_I_PROFILE); "" for a whole GPU


# dcgm-exporter's labels of a MIG instance's series, and the field its engine activity (a
# fraction; DCGM_FI_DEV_GPU_UTIL is not reported on MIG) fills in percent.
INSTANCE_LABEL = "GPU_I_ID"
PROFILE_LABEL = "GPU_I_PROFILE"
ENGINE_FIELD = "engine_active"


def gpu_rows(
    samples: Iterable[LabelledValue],
    field_of_metric: Mapping[str, str],
    *,
    pod_label: str,
    namespace_label: str,
) -> list[GpuRow]:
    """One row per GPU, or per MIG instance, from a node's per-GPU samples; `field_of_metric`
    maps each DCGM metric name to a GpuRow field (fb_free only serves to compute fb_total,
    ENGINE_FIELD a MIG instance's utilisation)."""
    per_gpu: dict[tuple[str, str], dict[str, Any]] = {}
    for labels, value in samples:
        key = (labels.get("gpu", "?"), labels.get(INSTANCE_LABEL, ""))
        gpu = per_gpu.setdefault(key, {})
        gpu[field_of_metric.get(labels.get("__name__", ""), "other")] = value
        if labels.get(PROFILE_LABEL):
            gpu["profile"] = labels[PROFILE_LABEL]
        if labels.get(pod_label):
            gpu["pod"] = labels[pod_label]
            gpu["namespace"] = labels.get(namespace_label, "")
    return [
        GpuRow(
            f"{gpu} instance {instance}" if instance else gpu,
            _utilisation(v, is_instance=bool(instance)),
            v.get("fb_used"),
            (v["fb_used"] + v["fb_free"]) if "fb_used" in v and "fb_free" in v else None,
            v.get("temp"),
            v.get("power"),
            v.get("sm_clock"),
            int(v.get("xid", 0)),
            v.get("pod", ""),
            v.get("namespace", ""),
            v.get("profile", ""),
        )
        for (gpu, instance), v in sorted(per_gpu.items(), key=_device_order)
    ]


def _utilisation(values: Mapping[str, Any], *, is_instance: bool) -> float | None:
    if values.get("util") is not None:
        return float(values["util"])
    engine = values.get(ENGINE_FIELD)
    return 100 * float(engine) if is_instance and engine is not None else None


def _device_order(item: tuple[tuple[str, str], object]) -> tuple[int, int, str]:
    gpu, instance = item[0]
    return (
        int(gpu) if gpu.isdigit() else 999,
        int(instance) if instance.isdigit() else -1,
        gpu,
    )
