"""The devices DRA drivers publish, read from ResourceSlices (`resource.k8s.io/v1`) (pure).

The facts relied on, from the Kubernetes API and its allocator:

- A driver publishes its devices in pools (`spec.pool.name`), each pool in one or more
  slices. A pool is rewritten under a new `spec.pool.generation`: only the slices of the
  highest generation count, and a pool counts only once all `spec.pool.resourceSliceCount`
  slices of that generation have been seen (before that it is "being updated", and the
  scheduler allocates nothing from it).
- A slice's devices belong to one node (`spec.nodeName`), to the nodes a `spec.nodeSelector`
  selects, or to every node (`spec.allNodes`).
- Attribute and capacity names are qualified by a domain (`gpu.nvidia.com/productName`); a
  bare name is in the driver's own domain. An attribute is one of `string`, `int`, `bool`,
  `version`; a capacity is a quantity (`value`).
- NVIDIA's DRA driver (`gpu.nvidia.com`) publishes attributes `type` (`gpu` or `mig`),
  `productName`, `architecture`, `driverVersion`, `cudaComputeCapability`, `uuid`, for MIG
  devices `profile` and `parentUUID`, and the capacity `memory`.
- A device is allocated when a ResourceClaim's `status.allocation.devices.results` names it
  (`driver`, `pool`, `device`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pools.core.dra.selectors import QUANTITY, VERSION, quantity_value
from pools.core.fit.fields import FieldReader
from pools.core.fit.scheduling import Term, read_terms

NVIDIA_DRIVER = "gpu.nvidia.com"
DeviceId = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True, eq=False)
class Device:
    driver: str
    pool: str
    name: str
    attributes: Mapping[str, Mapping[str, Any]]  # domain -> name -> value (versions as maps)
    capacity: Mapping[str, Mapping[str, Any]]  # domain -> name -> quantity map
    node: str = ""  # the node the device is on; "" for devices of several nodes
    # Its attributes and capacities as hashable (domain, name, value) rows, for signatures.
    flat: tuple[tuple[str, str, Any], ...] = field(default=(), repr=False)
    _signatures: dict[Any, Any] = field(default_factory=dict, repr=False)
    id: DeviceId = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", (self.driver, self.pool, self.name))

    def attribute(self, qualified: str) -> Any:
        """A `domain/name` attribute's value (None when the device has none)."""
        domain, _, name = qualified.rpartition("/")
        return self.attributes.get(domain or self.driver, {}).get(name)

    def cel_value(self, domains: Iterable[str] = ()) -> dict[str, Any]:
        attributes = {d: dict(v) for d, v in self.attributes.items()}
        capacity = {d: dict(v) for d, v in self.capacity.items()}
        for domain in domains:  # an absent domain reads as an empty map, as in Kubernetes
            attributes.setdefault(domain, {})
            capacity.setdefault(domain, {})
        return {
            "driver": self.driver,
            "attributes": attributes,
            "capacity": capacity,
            "allowMultipleAllocations": False,
        }

    def signature(self, names: frozenset[str] | None) -> Any:
        """What a selector reading only `names` can see of the device (None: everything)."""
        found = self._signatures.get(names)
        if found is None:
            if names is None:
                found = (self.driver, self.flat, self.id)
            else:
                found = (self.driver, tuple(row for row in self.flat if row[1] in names))
            self._signatures[names] = found
        return found

    @property
    def gpu_type(self) -> str:
        """NVIDIA's `type` attribute: "gpu" or "mig" ("" for other drivers' devices)."""
        value = self.attributes.get(NVIDIA_DRIVER, {}).get("type")
        return value if isinstance(value, str) else ""

    @property
    def product(self) -> str:
        value = self.attributes.get(NVIDIA_DRIVER, {}).get("productName")
        return value if isinstance(value, str) else ""

    @property
    def profile(self) -> str:
        value = self.attributes.get(NVIDIA_DRIVER, {}).get("profile")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class SharedDevices:
    """Devices of a slice that serves several nodes: every node, or those its selector takes."""

    devices: tuple[Device, ...]
    terms: tuple[Term, ...] | None  # None: every node

    def serves(self, labels: Mapping[str, str], name: str) -> bool:
        return self.terms is None or any(t.matches(labels, name) for t in self.terms)


@dataclass(frozen=True)
class DraInventory:
    by_node: Mapping[str, tuple[Device, ...]]
    shared: tuple[SharedDevices, ...] = ()
    updating: tuple[str, ...] = ()  # "driver/pool" of pools not yet complete

    def devices_of(self, name: str, labels: Mapping[str, str]) -> list[Device]:
        found = list(self.by_node.get(name, ()))
        for group in self.shared:
            if group.serves(labels, name):
                found += group.devices
        return found

    @property
    def empty(self) -> bool:
        return not self.by_node and not self.shared


EMPTY = DraInventory({})


def read_inventory(slices: Iterable[Mapping[str, Any]]) -> DraInventory:
    """The devices of the complete pools, at their highest generation."""
    pools: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        pools.setdefault((str(spec.get("driver", "")), str(pool.get("name", ""))), []).append(spec)
    by_node: dict[str, list[Device]] = {}
    shared: list[SharedDevices] = []
    updating: list[str] = []
    for (driver, name), specs in sorted(pools.items()):
        newest = max(int((s.get("pool") or {}).get("generation") or 0) for s in specs)
        current = [s for s in specs if int((s.get("pool") or {}).get("generation") or 0) == newest]
        wanted = max(int((s.get("pool") or {}).get("resourceSliceCount") or 1) for s in current)
        if len(current) < wanted:
            updating.append(f"{driver}/{name}")
            continue
        for spec in current:
            devices = tuple(
                _device(driver, name, d, str(spec.get("nodeName") or ""))
                for d in spec.get("devices") or ()
            )
            if spec.get("nodeName"):
                by_node.setdefault(str(spec["nodeName"]), []).extend(devices)
            elif spec.get("allNodes"):
                shared.append(SharedDevices(devices, None))
            elif spec.get("nodeSelector"):
                shared.append(SharedDevices(devices, _terms(spec["nodeSelector"])))
    return DraInventory({k: tuple(v) for k, v in by_node.items()}, tuple(shared), tuple(updating))


def _terms(selector: Mapping[str, Any]) -> tuple[Term, ...]:
    # A selector the API server accepted; what it might warn of is of no use here.
    return read_terms(FieldReader(), selector.get("nodeSelectorTerms"), "nodeSelector", [])


def _device(driver: str, pool: str, raw: Mapping[str, Any], node: str) -> Device:
    attributes: dict[str, dict[str, Any]] = {}
    flat: list[tuple[str, str, Any]] = []
    for qualified, value in (raw.get("attributes") or {}).items():
        domain, _, name = str(qualified).rpartition("/")
        read = _attribute_value(value)
        attributes.setdefault(domain or driver, {})[name] = read
        flat.append((domain or driver, name, read[VERSION] if isinstance(read, dict) else read))
    capacity: dict[str, dict[str, Any]] = {}
    for qualified, value in (raw.get("capacity") or {}).items():
        domain, _, name = str(qualified).rpartition("/")
        amount = (value or {}).get("value", "0") if isinstance(value, Mapping) else value
        capacity.setdefault(domain or driver, {})[name] = quantity = quantity_value(amount)
        flat.append((domain or driver, name, ("capacity", quantity[QUANTITY])))
    name = str(raw.get("name", ""))
    return Device(driver, pool, name, attributes, capacity, node, tuple(flat))


def _attribute_value(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    if "version" in value:
        return {VERSION: str(value["version"])}
    return None


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> frozenset[DeviceId]:
    """Every device some claim holds (`status.allocation.devices.results`)."""
    taken: set[DeviceId] = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or ():
            taken.add(
                (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            )
    return frozenset(taken)


def capacity_amount(device: Device, qualified: str) -> Any:
    domain, _, name = qualified.rpartition("/")
    value = device.capacity.get(domain or device.driver, {}).get(name)
    return None if value is None else value[QUANTITY]


def node_units(inventory: DraInventory, taken: frozenset[DeviceId]) -> dict[str, list[list[Any]]]:
    """Each node's own devices (`spec.nodeName` slices) by driver, type and MIG profile:
    [driver, type, profile, devices, held by a claim], as `Node.dra_units` keeps them.
    Devices of slices for several nodes belong to none of them and are not counted here."""
    found: dict[str, dict[tuple[str, str, str], list[int]]] = {}
    for node, devices in inventory.by_node.items():
        groups = found.setdefault(node, {})
        for device in devices:
            counts = groups.setdefault((device.driver, device.gpu_type, device.profile), [0, 0])
            counts[0] += 1
            counts[1] += device.id in taken
    return {
        node: [[*key, count, held] for key, (count, held) in sorted(groups.items())]
        for node, groups in found.items()
    }
