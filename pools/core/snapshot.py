"""From raw API objects to the figures the inventory keeps (pure)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pools.core.devices import COUNT_LABEL, NodeDevices, is_gpu_unit, node_devices
from pools.core.fit.api_objects import FINISHED
from pools.core.fit.resources import Resources, amount_or_zero

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"


@dataclass(frozen=True, slots=True)
class PodSummary:
    name: str
    namespace: str
    node: str
    gpus: int
    owner_kind: str
    phase: str
    # What the scheduler counts it as requesting; not in as_dict(): the node's sums hold them.
    cpu_milli: int = 0
    memory_bytes: int = 0
    # Every other resource it requests but nvidia.com/gpu (MIG profiles, shared GPUs,
    # ephemeral storage, ...), by name in whole units.
    extended: tuple[tuple[str, int], ...] = ()

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "gpus": self.gpus,
            "owner_kind": self.owner_kind,
            "phase": self.phase,
        }


@dataclass(frozen=True)
class NodeSnapshot:
    name: str
    labels: Mapping[str, str]
    taints: list[dict[str, str]]
    gpu_model: str
    gpu_count: int
    gpu_memory_mib: int
    gpu_allocatable: int
    cpu_allocatable: str
    memory_allocatable: str
    cpu_allocatable_milli: int
    memory_allocatable_bytes: int
    ready: bool
    cordoned: bool
    resource_version: str
    # Capacity against allocatable: the difference is what the kubelet reserves for the
    # system daemons (0 when the node does not say).
    cpu_capacity_milli: int = 0
    memory_capacity_bytes: int = 0
    pods_allocatable: int = 0  # pod slots the scheduler counts (0: not given)
    # Every other allocatable resource but nvidia.com/gpu (which gpu_allocatable holds), by
    # name in the scheduler's units: the fit check counts each as the scheduler does.
    resources: Mapping[str, int] = field(default_factory=dict)
    devices: NodeDevices | None = None  # physical GPUs and units by kind


# The allocatable entries that are not counted as `resources`: their own columns hold them.
_OWN_COLUMNS = frozenset({"cpu", "memory", "pods", GPU_RESOURCE})


def _quantity(value: Any) -> int:
    try:
        return int(str(value or "0"))
    except ValueError:
        return 0


def _amount(resource: str, value: object) -> int:
    """A quantity in the scheduler's units (millicores for CPU), 0 when absent or malformed."""
    if type(value) is str:
        return _amount_of_text(resource, value)
    return amount_or_zero(resource, value)


# A cluster's nodes say the same few quantities ("96", "1056Gi", "8") over and over, and a
# sync or a move reads thousands of them.
@functools.lru_cache(maxsize=4096)
def _amount_of_text(resource: str, value: str) -> int:
    return amount_or_zero(resource, value)


def is_gpu_node(raw: Mapping[str, Any]) -> bool:
    capacity = (raw.get("status") or {}).get("capacity") or {}
    labels = (raw.get("metadata") or {}).get("labels") or {}
    if labels.get(GPU_PRESENT_LABEL) == "true":
        return True
    # A node of MIG instances (mixed strategy) or shared GPUs may advertise no nvidia.com/gpu.
    return any(is_gpu_unit(name) and _quantity(value) > 0 for name, value in capacity.items())


def node_snapshot(raw: Mapping[str, Any]) -> NodeSnapshot:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    labels = dict(meta.get("labels") or {})
    allocatable = status.get("allocatable") or {}
    capacity = status.get("capacity") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    resources = {
        str(name): _amount(str(name), value)
        for name, value in allocatable.items()
        if name not in _OWN_COLUMNS
    }
    gpu_allocatable = _quantity(allocatable.get(GPU_RESOURCE))
    devices = node_devices(labels, {**resources, GPU_RESOURCE: gpu_allocatable})
    return NodeSnapshot(
        name=str(meta.get("name")),
        labels=labels,
        taints=[
            {k: str(v) for k, v in t.items() if k in ("key", "value", "effect")}
            for t in spec.get("taints") or []
        ],
        gpu_model=labels.get(GPU_PRODUCT_LABEL, ""),
        # Physical GPUs: a MIG instance or a shared replica is not a GPU.
        gpu_count=devices.gpus
        if COUNT_LABEL in labels or not devices.is_plain
        else _quantity(capacity.get(GPU_RESOURCE)),
        gpu_memory_mib=devices.memory_mib or _quantity(labels.get(GPU_MEMORY_LABEL)),
        gpu_allocatable=gpu_allocatable,
        cpu_allocatable=str(allocatable.get("cpu", "")),
        memory_allocatable=str(allocatable.get("memory", "")),
        cpu_allocatable_milli=_amount("cpu", allocatable.get("cpu")),
        memory_allocatable_bytes=_amount("memory", allocatable.get("memory")),
        ready=ready,
        cordoned=bool(spec.get("unschedulable")),
        resource_version=str(meta.get("resourceVersion", "")),
        cpu_capacity_milli=_amount("cpu", capacity.get("cpu")),
        memory_capacity_bytes=_amount("memory", capacity.get("memory")),
        pods_allocatable=_quantity(allocatable.get("pods")),
        resources=resources,
        devices=devices,
    )


def node_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What a move records of a node before and after: its labels, taints and cordon."""
    return {
        "labels": (raw.get("metadata") or {}).get("labels") or {},
        "taints": (raw.get("spec") or {}).get("taints") or [],
        "unschedulable": bool((raw.get("spec") or {}).get("unschedulable")),
    }


def pod_gpus(raw: Mapping[str, Any]) -> int:
    total = 0
    for container in (raw.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        # Extended resources: the limit is the request when only the limit is given.
        value = (resources.get("requests") or {}).get(GPU_RESOURCE) or (
            resources.get("limits") or {}
        ).get(GPU_RESOURCE)
        total += _quantity(value)
    return total


def pod_units(raw: Mapping[str, Any]) -> int:
    """The GPU units a pod's containers hold: whole GPUs, MIG instances and shared GPUs. A
    drain evicts a pod holding any: a MIG instance in use stops its GPU's reconfiguration
    as surely as a whole GPU does."""
    total = 0
    for container in (raw.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        # Extended resources: the limit is the request when only the limit is given.
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        total += sum(_quantity(value) for name, value in asked.items() if is_gpu_unit(name))
    return total


def pod_summary(raw: Mapping[str, Any], requests: Resources | None = None) -> PodSummary | None:
    """The pod as the inventory keeps it on its node, or None for a pod bound to no node.
    `requests`: the pod's requests as the scheduler counts them (pools.core.pod_record)."""
    node = (raw.get("spec") or {}).get("nodeName")
    if not node:
        return None
    meta = raw.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else {})
    return PodSummary(
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace", "")),
        node=str(node),
        gpus=pod_gpus(raw),
        owner_kind=str(owner.get("kind", "")),
        phase=str((raw.get("status") or {}).get("phase", "")),
        cpu_milli=requests.cpu_milli if requests else 0,
        memory_bytes=requests.memory if requests else 0,
        extended=tuple((n, a) for n, a in requests.extended if a) if requests else (),
    )
