"""A node's physical GPUs and the units the scheduler hands out of them, by kind (pure).

The facts relied on, from NVIDIA's device plugin, GPU feature discovery (GFD) and GPU
operator:

- Whole GPUs: the resource `nvidia.com/gpu`, one unit a GPU; GFD's `nvidia.com/gpu.count`
  is the number of GPUs, `nvidia.com/gpu.product` their model, `nvidia.com/gpu.memory` the
  MiB of one.
- MIG, `single` strategy (`nvidia.com/mig.strategy=single`): every GPU is split into equal
  GPU instances, each advertised as one `nvidia.com/gpu`. GFD then describes the instance,
  not the GPU: the product gets a `-MIG-<profile>` suffix, the count is the number of
  instances and the memory an instance's.
- MIG, `mixed` strategy: each profile is its own resource, `nvidia.com/mig-<profile>`;
  `nvidia.com/gpu` counts only the GPUs with MIG disabled; GFD's count, product and memory
  stay the physical GPUs'.
- Sharing (time-slicing or MPS): each GPU is advertised `nvidia.com/gpu.replicas` times,
  with `nvidia.com/gpu.sharing-strategy`; as `nvidia.com/gpu` (the product gets a `-SHARED`
  suffix) or, when the plugin renames shared resources, as `nvidia.com/gpu.shared` (and a
  MIG profile's as `nvidia.com/mig-<profile>.shared`).
- How many instances of a profile fit on one GPU: 7, 3, 2, 1, 1 for 1g, 2g, 3g, 4g, 7g on
  the seven-slice GPUs (A100, H100, H200, B200), 4, 2, 1 for 1g, 2g, 4g on the A30.

- DRA: a driver publishes its devices in ResourceSlices instead of advertising a resource;
  NVIDIA's driver (`gpu.nvidia.com`) publishes each whole GPU (`type` gpu) and each MIG
  device (`type` mig, with its `profile`). A claim's allocation holds a device.

A slice or a replica is never a GPU: the physical count comes from GFD's labels, and each
kind of unit is counted apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
MEMORY_LABEL = "nvidia.com/gpu.memory"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
# The GPU operator's labels a node's device set is configured through, as the pages show.
OPERATOR_LABELS = (
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    MIG_STRATEGY_LABEL,
    REPLICAS_LABEL,
    SHARING_LABEL,
    PLUGIN_CONFIG_LABEL,
)

WHOLE = "gpu"
MIG = "mig"
SHARED = "shared"
DRA = "dra"  # a device a DRA driver publishes (pools.core.dra)
KINDS = (WHOLE, MIG, SHARED, DRA)

PROFILE_RE = re.compile(r"^(?P<slices>[1-7])g\.(?P<gb>[0-9]+)gb(?:\+me)?$")
_MIG_RESOURCE_RE = re.compile(r"^nvidia\.com/mig-(?P<profile>[^/]+?)(?P<shared>\.shared)?$")
_MEMORY_IN_MODEL_RE = re.compile(r"-(?P<gb>[0-9]+)GB(?:-|$)")
_SEVEN_SLICES = {1: 7, 2: 3, 3: 2, 4: 1, 7: 1}
_FOUR_SLICES = {1: 4, 2: 2, 4: 1}


@dataclass(frozen=True, slots=True)
class UnitKind:
    """One kind of unit a node advertises: its resource name and what a unit is."""

    kind: str  # WHOLE, MIG, SHARED or DRA
    resource: str  # for DRA: the driver
    profile: str = ""  # the MIG profile, e.g. 1g.10gb
    sharing: str = ""  # time-slicing or mps, for shared units
    replicas: int = 1  # units a GPU (or a MIG instance) is advertised as, when shared

    @property
    def label(self) -> str:
        """How the pages name the kind: "whole GPU", "MIG 1g.10gb", "shared GPU
        (time-slicing, 4 per GPU)"."""
        if self.kind == WHOLE:
            return "whole GPU"
        if self.kind == DRA:
            # The driver's device type (NVIDIA's: gpu or mig), and the MIG profile.
            what = {"gpu": "GPU", "mig": "MIG"}.get(self.sharing, self.sharing or "device")
            return f"DRA {what} {self.profile}".rstrip() + f" ({self.resource})"
        per = "instance" if self.kind == MIG else "GPU"
        how = self.sharing or "shared"
        shared = f"{how}, {self.replicas} per {per}" if self.replicas > 1 else ""
        if self.kind == MIG:
            return f"MIG {self.profile}" + (f" ({shared})" if shared else "")
        return f"shared GPU ({shared})" if shared else "shared GPU"

    @property
    def key(self) -> str:
        """A stable key for the kind across nodes: totals per pool add up by it."""
        return self.label


@dataclass(frozen=True, slots=True)
class Units:
    kind: UnitKind
    allocatable: int
    allocated: int = 0

    @property
    def free(self) -> int:
        return max(self.allocatable - self.allocated, 0)


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """The physical GPUs of a node and its schedulable units, by kind."""

    model: str  # the physical GPU model, without a MIG or sharing suffix
    memory_mib: int  # one physical GPU's; 0 when unknown
    gpus: int  # physical GPUs
    mig_gpus: int  # of them, the GPUs split into MIG instances
    units: tuple[Units, ...]
    operator: tuple[tuple[str, str], ...] = ()  # the operator labels the node carries

    @property
    def whole_gpus(self) -> int:
        return sum(u.allocatable for u in self.units if u.kind.kind == WHOLE)

    @property
    def whole_allocated(self) -> int:
        return sum(u.allocated for u in self.units if u.kind.kind == WHOLE)

    @property
    def mig_instances(self) -> int:
        """MIG instances, each counted once whatever it is shared as."""
        return sum(u.allocatable // u.kind.replicas for u in self.units if u.kind.kind == MIG)

    @property
    def exporter_devices(self) -> int:
        """The devices dcgm-exporter reports on: each GPU not in MIG mode, and each MIG
        instance (a shared GPU is still one device)."""
        return max(self.gpus - self.mig_gpus, 0) + self.mig_instances

    @property
    def is_plain(self) -> bool:
        """Whole GPUs only, as nodes were before MIG and sharing."""
        return all(u.kind.kind == WHOLE for u in self.units) and not self.mig_gpus

    def state(self, label: str) -> str:
        return dict(self.operator).get(label, "")


def instances_per_gpu(profile: str, model: str) -> int:
    """How many instances of `profile` one GPU of `model` holds (0: not a profile)."""
    match = PROFILE_RE.match(profile)
    if match is None:
        return 0
    table = _FOUR_SLICES if "A30" in model else _SEVEN_SLICES
    return table.get(int(match["slices"]), 0)


def physical_model(product: str) -> str:
    """GFD's product label without the suffix MIG (single strategy) or sharing adds."""
    return product.split("-MIG-", 1)[0].removesuffix("-SHARED")


def unit_kind(resource: str, labels: Mapping[str, str]) -> UnitKind | None:
    """What one unit of `resource` is on a node with these labels (None: not a GPU unit)."""
    replicas = _positive(labels.get(REPLICAS_LABEL), 1)
    sharing = labels.get(SHARING_LABEL, "") if replicas > 1 else ""
    if resource == GPU_RESOURCE:
        product = labels.get(PRODUCT_LABEL, "")
        if labels.get(MIG_STRATEGY_LABEL) == "single" and "-MIG-" in product:
            profile = product.split("-MIG-", 1)[1].removesuffix("-SHARED")
            return UnitKind(MIG, resource, profile, sharing, replicas)
        if replicas > 1:
            return UnitKind(SHARED, resource, "", sharing, replicas)
        return UnitKind(WHOLE, resource)
    if resource == SHARED_RESOURCE:
        return UnitKind(SHARED, resource, "", sharing, replicas)
    match = _MIG_RESOURCE_RE.match(resource)
    if match is not None:
        shared = bool(match["shared"]) or replicas > 1
        return UnitKind(
            MIG, resource, match["profile"], sharing if shared else "", replicas if shared else 1
        )
    return None


def is_gpu_unit(resource: str) -> bool:
    return resource in (GPU_RESOURCE, SHARED_RESOURCE) or bool(_MIG_RESOURCE_RE.match(resource))


def node_devices(
    labels: Mapping[str, str],
    allocatable: Mapping[str, int],
    allocated: Mapping[str, int] | None = None,
) -> NodeDevices:
    """The node's devices from its labels and its allocatable GPU resources (by name, in
    units), with what its pods hold of each (`allocated`, by resource name)."""
    allocated = allocated or {}
    units = []
    for resource in sorted(allocatable):
        kind = unit_kind(resource, labels)
        # A resource at 0 offers nothing (a mixed-strategy node's nvidia.com/gpu when every
        # GPU is split), unless pods still hold some of it.
        if kind is not None and (allocatable[resource] or allocated.get(resource)):
            units.append(Units(kind, allocatable[resource], allocated.get(resource, 0)))
    product = labels.get(PRODUCT_LABEL, "")
    model = physical_model(product)
    single = [u for u in units if u.kind.kind == MIG and u.kind.resource == GPU_RESOURCE]
    memory = _positive(labels.get(MEMORY_LABEL), 0)
    if single:
        # GFD describes the instances: the GPUs are the instances over those a GPU holds.
        per_gpu = instances_per_gpu(single[0].kind.profile, model) or 1
        instances = single[0].allocatable // single[0].kind.replicas
        gpus = mig_gpus = -(-instances // per_gpu)
        memory = _memory_in_model(model)
    else:
        whole_or_shared = sum(u.allocatable // u.kind.replicas for u in units if u.kind.kind != MIG)
        gpus = _positive(labels.get(COUNT_LABEL), 0) or whole_or_shared
        has_mig = any(u.kind.kind == MIG for u in units)
        mig_gpus = max(gpus - whole_or_shared, 0) if has_mig else 0
    operator = tuple((k, labels[k]) for k in OPERATOR_LABELS if k in labels)
    return NodeDevices(model, memory, gpus, mig_gpus, tuple(units), operator)


def _memory_in_model(model: str) -> int:
    match = _MEMORY_IN_MODEL_RE.search(model)
    return int(match["gb"]) * 1024 if match else 0


def _positive(value: object, default: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        return default
    return number if number > 0 else default


# --- layouts: what a pool may accept ----------------------------------------------------

WHOLE_LAYOUT = "whole"
SHARED_LAYOUT = "shared"
DRA_LAYOUT = "dra"
MIG_LAYOUT_PREFIX = "mig-"


def layout_of(kind: UnitKind) -> str:
    """A kind of unit as a pool's accepted layouts name it: whole, shared, mig-<profile>."""
    if kind.kind == MIG:
        return f"{MIG_LAYOUT_PREFIX}{kind.profile}"
    if kind.kind == DRA:
        return DRA_LAYOUT
    return SHARED_LAYOUT if kind.kind == SHARED else WHOLE_LAYOUT


def node_layouts(devices: NodeDevices) -> tuple[str, ...]:
    """The layouts a node offers its GPUs in, sorted (none: no GPU unit at all)."""
    return tuple(sorted({layout_of(u.kind) for u in devices.units if u.allocatable}))


def layout_problem(layout: object) -> str | None:
    """Why a value is not a layout a pool can accept, or None."""
    if not isinstance(layout, str):
        return "must be a string"
    if layout in (WHOLE_LAYOUT, SHARED_LAYOUT, DRA_LAYOUT):
        return None
    profile = layout.removeprefix(MIG_LAYOUT_PREFIX)
    if layout.startswith(MIG_LAYOUT_PREFIX) and PROFILE_RE.match(profile):
        return None
    return "must be whole, shared, dra, or mig-<profile> with a MIG profile like mig-1g.10gb"


# --- the record the inventory keeps -------------------------------------------------------


def devices_record(devices: NodeDevices) -> dict[str, Any]:
    """What a node row keeps of its devices, apart from what its pods hold (that changes
    with every pod and is kept per resource): empty for a node of whole GPUs only, whose
    figures the GPU columns already hold."""
    if devices.is_plain:
        return {}
    return {
        "model": devices.model,
        "memory_mib": devices.memory_mib,
        "gpus": devices.gpus,
        "mig_gpus": devices.mig_gpus,
        "units": [
            [
                u.kind.kind,
                u.kind.resource,
                u.kind.profile,
                u.kind.sharing,
                u.kind.replicas,
                u.allocatable,
            ]
            for u in devices.units
        ],
        "operator": dict(devices.operator),
    }


def dra_units(rows: Sequence[Sequence[Any]]) -> tuple[Units, ...]:
    """A node row's DRA units (`Node.dra_units`: [driver, type, profile, devices, held])."""
    return tuple(
        Units(UnitKind(DRA, driver, profile, kind), int(count), int(held))
        for driver, kind, profile, count, held in rows
    )


def devices_from_record(
    record: Mapping[str, Any],
    *,
    gpu_model: str,
    gpu_count: int,
    gpu_memory_mib: int,
    gpu_allocatable: int,
    gpu_allocated: int,
    requested: Mapping[str, int],
    dra: Sequence[Sequence[Any]] = (),
) -> NodeDevices:
    """A node row's devices: from its record, or from its GPU columns when it has only
    whole GPUs (an empty record); with the DRA devices its slices publish (`dra`)."""
    if not record:
        units = (Units(UnitKind(WHOLE, GPU_RESOURCE), gpu_allocatable, gpu_allocated),)
        return NodeDevices(
            gpu_model,
            gpu_memory_mib,
            gpu_count,
            0,
            (*(units if gpu_allocatable else ()), *dra_units(dra)),
        )
    units = tuple(
        Units(
            UnitKind(kind, resource, profile, sharing, replicas),
            allocatable,
            gpu_allocated if resource == GPU_RESOURCE else requested.get(resource, 0),
        )
        for kind, resource, profile, sharing, replicas, allocatable in record.get("units", [])
    ) + dra_units(dra)
    return NodeDevices(
        str(record.get("model", "")),
        int(record.get("memory_mib", 0)),
        int(record.get("gpus", 0)),
        int(record.get("mig_gpus", 0)),
        units,
        tuple((record.get("operator") or {}).items()),
    )


# The node row's columns a node's devices are read from (pools.models.Node's).
DEVICE_COLUMNS = (
    "devices",
    "gpu_model",
    "gpu_count",
    "gpu_memory_mib",
    "gpu_allocatable",
    "gpu_allocated",
    "resources_requested",
    "dra_units",
)


def devices_of_row(row: Mapping[str, Any]) -> NodeDevices:
    """A node's devices from its row's DEVICE_COLUMNS, by name (the JSON ones parsed)."""
    return devices_from_record(
        row["devices"],
        gpu_model=row["gpu_model"],
        gpu_count=row["gpu_count"],
        gpu_memory_mib=row["gpu_memory_mib"],
        gpu_allocatable=row["gpu_allocatable"],
        gpu_allocated=row["gpu_allocated"],
        requested=row["resources_requested"],
        dra=row["dra_units"],
    )


def exporter_devices(record: Mapping[str, Any]) -> int:
    """The devices dcgm-exporter reports on, from a node's device record (NodeDevices')."""
    return devices_from_record(
        record,
        gpu_model="",
        gpu_count=0,
        gpu_memory_mib=0,
        gpu_allocatable=0,
        gpu_allocated=0,
        requested={},
    ).exporter_devices


def devices_as_dict(devices: NodeDevices) -> dict[str, Any]:
    """The node's devices as the API and the CSV give them."""
    return {
        "model": devices.model,
        "memory_mib": devices.memory_mib,
        "gpus": devices.gpus,
        "mig_gpus": devices.mig_gpus,
        "units": [
            {
                "kind": u.kind.kind,
                "label": u.kind.label,
                "resource": u.kind.resource,
                "profile": u.kind.profile,
                "sharing": u.kind.sharing,
                "replicas": u.kind.replicas,
                "allocatable": u.allocatable,
                "allocated": u.allocated,
                "free": u.free,
            }
            for u in devices.units
        ],
        "operator": dict(devices.operator),
    }


def record_units(record: Mapping[str, Any], gpu_allocatable: int) -> int:
    """The GPU units a node row offers pods (MIG instances, shares, whole GPUs; not DRA
    devices, which claims take), from its device record; its GPUs when it has only whole
    ones (an empty record)."""
    if not record:
        return gpu_allocatable
    return sum(int(unit[5]) for unit in record.get("units", ()))


def units_held(gpu_allocated: int, requested: Mapping[str, int]) -> int:
    """The GPU units a node's pods hold: its whole GPUs allocated and every other GPU unit
    they request (`requested`: the node's extended resources requested, by name)."""
    return gpu_allocated + sum(
        n for name, n in requested.items() if name != GPU_RESOURCE and is_gpu_unit(name)
    )


def units_asked(gpus: int, requests: Mapping[str, int]) -> str:
    """What a pod asks for of GPU units, as the pages say it: "2 GPUs", "1 MIG 1g.10gb",
    "2 shared GPUs", several joined by commas; `requests`: its GPU units other than whole
    GPUs, by resource name."""
    parts = [f"{gpus} GPU{'' if gpus == 1 else 's'}"] if gpus else []
    for resource, n in sorted(requests.items()):
        kind = unit_kind(resource, {})
        if kind is None or n <= 0:
            continue
        if kind.kind == MIG:
            shared = " (shared)" if resource.endswith(".shared") else ""
            parts.append(f"{n} MIG {kind.profile}{shared}")
        else:
            parts.append(f"{n} shared GPU{'' if n == 1 else 's'}")
    return ", ".join(parts) or "no GPU"
