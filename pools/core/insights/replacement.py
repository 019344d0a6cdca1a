"""Replacement difficulty (pure): how alike a pool's nodes are. When each machine depends on
its own driver, image or hand-set configuration, replacing one is work: automate
installation and version management before adding nodes.

Each dimension (GPU model, driver, CUDA, OS image, kernel) is compared with the pool's most
common value; labels and taints set outside the managed set and outside what automation
(Kubernetes, GPU feature discovery, node feature discovery, cloud providers) sets are hand
configuration."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from pools.core.devices import physical_model
from pools.core.insights.records import InsightNode

# Label prefixes automation sets: a node carries them without anyone's hand.
AUTOMATED_LABEL_PREFIXES = (
    "kubernetes.io/",
    "beta.kubernetes.io/",
    "node.kubernetes.io/",
    "node-role.kubernetes.io/",
    "topology.kubernetes.io/",
    "failure-domain.beta.kubernetes.io/",
    "nvidia.com/",
    "feature.node.kubernetes.io/",
    "cloud.google.com/",
    "eks.amazonaws.com/",
    "kubernetes.azure.com/",
    "karpenter.sh/",
)
AUTOMATED_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
AUTOMATED_TAINT_KEYS = frozenset({"nvidia.com/gpu", "node-role.kubernetes.io/control-plane"})

# Where each compared property comes from: the exporter's driver label first, then GPU and
# node feature discovery labels.
DRIVER_LABELS = ("nvidia.com/cuda.driver-version.full",)
DRIVER_PARTS = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor")
CUDA_LABELS = ("nvidia.com/cuda.runtime-version.full",)
CUDA_PARTS = ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor")
OS_LABELS = ("feature.node.kubernetes.io/system-os_release.ID",)
OS_VERSION_LABELS = ("feature.node.kubernetes.io/system-os_release.VERSION_ID",)
KERNEL_LABELS = ("feature.node.kubernetes.io/kernel-version.full",)

# How much a difference costs when replacing a node (a driver or a GPU model decides what
# runs; a kernel or an OS image mostly what must be rebuilt).
WEIGHTS = {
    "gpu_model": 3,
    "driver": 3,
    "cuda": 2,
    "os": 1,
    "kernel": 1,
    "hand_labels": 2,
    "hand_taints": 2,
}
DIMENSION_TITLES = {
    "gpu_model": "GPU model",
    "driver": "driver version",
    "cuda": "CUDA version",
    "os": "OS image",
    "kernel": "kernel",
    "hand_labels": "hand-set labels",
    "hand_taints": "hand-set taints",
}
HIGH_SCORE = 15


def _first(labels: Mapping[str, str], keys: Sequence[str]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def _joined(labels: Mapping[str, str], keys: Sequence[str]) -> str:
    parts = [labels.get(k, "") for k in keys]
    return ".".join(p for p in parts if p) if parts[0] else ""


def node_traits(node: InsightNode) -> dict[str, str]:
    labels = node.labels
    os_name = _first(labels, OS_LABELS)
    os_version = _first(labels, OS_VERSION_LABELS)
    return {
        # The GPU itself: GFD's product label of a single-strategy MIG node or a shared GPU
        # carries a suffix (-MIG-1g.10gb, -SHARED) that is its layout, not another model.
        "gpu_model": physical_model(node.gpu_model),
        "driver": node.driver or _first(labels, DRIVER_LABELS) or _joined(labels, DRIVER_PARTS),
        "cuda": _first(labels, CUDA_LABELS) or _joined(labels, CUDA_PARTS),
        "os": f"{os_name} {os_version}".strip(),
        "kernel": _first(labels, KERNEL_LABELS),
    }


def hand_labels(labels: Mapping[str, str], managed: Collection[str]) -> list[str]:
    return sorted(
        f"{k}={v}"
        for k, v in labels.items()
        if k not in managed and not k.startswith(AUTOMATED_LABEL_PREFIXES)
    )


def hand_taints(taints: Sequence[tuple[str, str, str]], managed: Collection[str]) -> list[str]:
    return sorted(
        f"{k}={v}:{e}" if v else f"{k}:{e}"
        for k, v, e in taints
        if k not in managed
        and k not in AUTOMATED_TAINT_KEYS
        and not k.startswith(AUTOMATED_TAINT_PREFIXES)
    )


@dataclass(frozen=True)
class Dimension:
    name: str
    values: Mapping[str, int]  # value -> nodes ('' : unknown)
    odd: int  # nodes that differ from the most common value (hand config: that have some)

    @property
    def mixed(self) -> bool:
        return len([v for v in self.values if v]) > 1


@dataclass(frozen=True)
class ReplacementReport:
    nodes: int = 0
    score: int = 0  # 0 (all alike, nothing by hand) to 100
    dimensions: list[Dimension] = field(default_factory=list)
    odd_nodes: Mapping[str, list[str]] = field(default_factory=dict)  # node -> what differs

    def dimension(self, name: str) -> Dimension | None:
        return next((d for d in self.dimensions if d.name == name), None)

    @property
    def mixes_models_or_drivers(self) -> list[str]:
        return [d.name for d in self.dimensions if d.name in ("gpu_model", "driver") and d.mixed]

    @property
    def hand_score(self) -> int:
        """The score without the GPU model and driver mix (what splitting would not fix)."""
        return _score(
            [d for d in self.dimensions if d.name not in ("gpu_model", "driver")], self.nodes
        )

    @property
    def level(self) -> str:
        return "high" if self.score >= HIGH_SCORE else "medium" if self.odd_nodes else "low"


def _score(dimensions: Sequence[Dimension], nodes: int) -> int:
    if not nodes:
        return 0
    weight = sum(WEIGHTS.values())
    return round(100 * sum(WEIGHTS[d.name] * d.odd / nodes for d in dimensions) / weight * 2)


def replacement_report(
    nodes: Sequence[InsightNode],
    *,
    managed_labels: Collection[str],
    managed_taints: Collection[str],
) -> ReplacementReport:
    traits = {n.name: node_traits(n) for n in nodes}
    odd: dict[str, list[str]] = {}
    dimensions = []
    for name in ("gpu_model", "driver", "cuda", "os", "kernel"):
        values = Counter(t[name] for t in traits.values())
        known = Counter({v: c for v, c in values.items() if v})
        common = known.most_common(1)[0][0] if known else ""
        differing = [n for n, t in traits.items() if t[name] and t[name] != common]
        for n in differing:
            odd.setdefault(n, []).append(f"{DIMENSION_TITLES[name]} {traits[n][name]}")
        dimensions.append(Dimension(name, dict(values), len(differing)))
    for name, found in (
        ("hand_labels", {n.name: hand_labels(n.labels, managed_labels) for n in nodes}),
        ("hand_taints", {n.name: hand_taints(n.taints, managed_taints) for n in nodes}),
    ):
        with_any = {n: items for n, items in found.items() if items}
        for n, items in with_any.items():
            odd.setdefault(n, []).append(f"{DIMENSION_TITLES[name]}: {', '.join(items)}")
        values = Counter(", ".join(items) for items in found.values())
        dimensions.append(Dimension(name, dict(values), len(with_any)))
    return ReplacementReport(
        nodes=len(nodes),
        score=min(100, _score(dimensions, len(nodes))),
        dimensions=dimensions,
        odd_nodes=dict(sorted(odd.items())),
    )
