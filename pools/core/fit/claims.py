"""The DynamicResources plugin: a pod's ResourceClaims against the cluster's devices (pure).

Its PreFilter finds each claim (a shared one by name; a pod's own from its template, which
the resourceclaim controller turns into a claim before the scheduler sees the pod) and each
DeviceClass the claims name; a missing one makes every node fail with the plugin's words:

    resourceclaim.resource.k8s.io "shared-gpu" not found
    request gpu: device class gpu.example.com does not exist
    pod "team-a/trainer": ResourceClaim not created yet      (its template does not exist)

Its Filter allocates, on each node, every claim not yet allocated (`pools.core.dra.allocate`)
and refuses the node with `cannot allocate all claims`; a claim already allocated binds the
pod to the nodes its allocation names (`resourceclaim not available on the node`). Neither
is helped by preemption (the plugin answers UnschedulableAndUnresolvable).

How many pods fit on a node: pods of a template each get their own claim, so the devices
they take add up; pods sharing one claim share its devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pools.core.dra.allocate import AllocationError, Allocator
from pools.core.dra.claims import ClaimSpec, PodClaim, class_selectors, read_claim_spec
from pools.core.dra.inventory import (
    EMPTY,
    Device,
    DeviceId,
    DraInventory,
    allocated_devices,
    read_inventory,
)
from pools.core.dra.selectors import SelectorCache
from pools.core.fit.fields import FieldReader
from pools.core.fit.scheduling import Term, read_terms
from pools.core.gc_pause import collector_paused

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"
NOT_CREATED = "ResourceClaim not created yet"


@dataclass(frozen=True)
class ClusterClaim:
    spec: ClaimSpec
    on_nodes: tuple[Term, ...] | None = None  # allocated: the nodes its allocation names
    allocated: bool = False


@dataclass(frozen=True)
class DraState:
    """What the cluster holds for DRA: devices, classes, claims, templates."""

    inventory: DraInventory = EMPTY
    classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    taken: frozenset[DeviceId] = frozenset()
    claims: Mapping[tuple[str, str], ClusterClaim] = field(default_factory=dict)
    templates: Mapping[tuple[str, str], ClaimSpec] = field(default_factory=dict)


NO_DRA = DraState()


def dra_state(
    slices: Sequence[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    templates: Sequence[Mapping[str, Any]],
) -> DraState:
    """The state from the API's objects (as the client's `to_dict()` or raw JSON gives them,
    camelCase keys). Devices, dicts and tuples, no cycle among them: built with the cyclic
    collector paused (pools.core.gc_pause), whose passes over 120,000 devices cost more
    than building them."""
    with collector_paused():
        return _dra_state(slices, classes, claims, templates)


def _dra_state(
    slices: Sequence[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    templates: Sequence[Mapping[str, Any]],
) -> DraState:
    return DraState(
        inventory=read_inventory(slices),
        classes={_name(c): class_selectors(c) for c in classes},
        taken=allocated_devices(claims),
        claims={(_namespace(c), _name(c)): _cluster_claim(c) for c in claims},
        templates={
            (_namespace(t), _name(t)): _spec((t.get("spec") or {}).get("spec")) for t in templates
        },
    )


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _spec(raw: object) -> ClaimSpec:
    return read_claim_spec(FieldReader(), raw, "spec")


def _cluster_claim(claim: Mapping[str, Any]) -> ClusterClaim:
    allocation = (claim.get("status") or {}).get("allocation")
    spec = _spec(claim.get("spec"))
    if not allocation:
        return ClusterClaim(spec)
    selector = allocation.get("nodeSelector") or {}
    terms = None
    if selector.get("nodeSelectorTerms"):
        terms = read_terms(FieldReader(), selector["nodeSelectorTerms"], "nodeSelector", [])
    return ClusterClaim(spec, terms, True)


@dataclass(frozen=True)
class ClaimNeed:
    """A pod shape's claims, resolved: what PreFilter said, and what Filter must allocate."""

    prefilter: str = ""  # the reason every node fails; "" when PreFilter passes
    per_pod: tuple[ClaimSpec, ...] = ()  # from templates: each pod gets its own
    shared: tuple[ClaimSpec, ...] = ()  # named claims not yet allocated
    pinned: tuple[tuple[Term, ...], ...] = ()  # node selectors of allocated named claims

    @property
    def empty(self) -> bool:
        return not (self.prefilter or self.per_pod or self.shared or self.pinned)


NO_NEED = ClaimNeed()


def claim_need(claims: Sequence[PodClaim], state: DraState, pod: str) -> ClaimNeed:
    """`pod`: how the plugin names the pod in its message (namespace/name)."""
    if not claims:
        return NO_NEED
    per_pod: list[ClaimSpec] = []
    shared: list[ClaimSpec] = []
    pinned: list[tuple[Term, ...]] = []
    for claim in claims:
        key = (claim.namespace, claim.claim_name or claim.template_name)
        if claim.template_name:
            spec = claim.spec or state.templates.get(key)
            if spec is None:
                return ClaimNeed(prefilter=f'pod "{pod}": {NOT_CREATED}')
            per_pod.append(spec)
            continue
        found = state.claims.get(key)
        if claim.spec is not None and found is None:
            shared.append(claim.spec)
        elif found is None:
            missing = f'resourceclaim.resource.k8s.io "{claim.claim_name}" not found'
            return ClaimNeed(prefilter=missing)
        elif found.allocated:
            pinned.append(found.on_nodes or ())
        else:
            shared.append(found.spec)
    for spec in (*per_pod, *shared):
        for request, device_class in spec.classes:
            if device_class not in state.classes:
                return ClaimNeed(
                    prefilter=f"request {request}: device class {device_class} does not exist"
                )
    return ClaimNeed("", tuple(per_pod), tuple(shared), tuple(pinned))


class ClaimFilter:
    """The Filter and the room of one claim need on the snapshot's nodes."""

    def __init__(self, need: ClaimNeed, state: DraState, cache: SelectorCache) -> None:
        self.need = need
        self.state = state
        self.allocator = Allocator(state.classes, cache)
        self._devices: dict[str, list[Device]] = {}
        self._room: dict[tuple[str, int], tuple[int, frozenset[DeviceId]]] = {}

    def devices(self, name: str, labels: Mapping[str, str]) -> list[Device]:
        """The node's devices: one list a node for the filter's life (the allocator keeps
        what fits a request per list)."""
        found = self._devices.get(name)
        if found is None:
            found = self._devices[name] = self.state.inventory.devices_of(name, labels)
        return found

    def rejection(self, name: str, labels: Mapping[str, str]) -> str | None:
        """Why the node cannot take the pod's claims (None: it can)."""
        for terms in self.need.pinned:
            if terms and not any(t.matches(labels, name) for t in terms):
                return NOT_ON_NODE
        claims = (*self.need.shared, *self.need.per_pod)
        if not claims:
            return None
        try:
            found = self.allocator.allocate(claims, self.devices(name, labels), self.state.taken)
        except AllocationError as error:
            return str(error)
        return None if found is not None else CANNOT_ALLOCATE

    def could_take(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether the node's devices could take the pod's claims were none of them held (a
        pool's fix can work there, once the devices are free)."""
        if self.need.prefilter:
            return False
        claims = (*self.need.shared, *self.need.per_pod)
        if not claims:
            return True
        try:
            return self.allocator.allocate(claims, self.devices(name, labels)) is not None
        except AllocationError:
            return False

    def room(
        self, name: str, labels: Mapping[str, str], used: frozenset[DeviceId], most: int
    ) -> tuple[int, frozenset[DeviceId]]:
        """How many more pods (at most `most`) the node's devices take, and the devices they
        would hold, on top of `used` (the cluster's and each pool's verdicts ask the same of a
        node with nothing placed yet: kept)."""
        if not used:
            key = (name, most)
            if key not in self._room:
                self._room[key] = self._count(name, labels, used, most)
            return self._room[key]
        return self._count(name, labels, used, most)

    def _count(
        self, name: str, labels: Mapping[str, str], used: frozenset[DeviceId], most: int
    ) -> tuple[int, frozenset[DeviceId]]:
        for terms in self.need.pinned:
            if terms and not any(t.matches(labels, name) for t in terms):
                return 0, used
        if not self.need.per_pod and not self.need.shared:
            return most, used
        devices = self.devices(name, labels)
        # What is held of this node's devices: the cluster's claims', and `used`.
        held = {d.id for d in devices if d.id in self.state.taken}
        taken = held | set(used)
        count = 0
        claims: tuple[ClaimSpec, ...] = (*self.need.shared, *self.need.per_pod)
        while count < most:
            try:
                found = self.allocator.allocate(claims, devices, taken)
            except AllocationError:
                break
            if found is None:
                break
            count += 1
            taken.update(d for per_claim in found for d in per_claim)
            if not self.need.per_pod:
                return most, frozenset(taken - held)  # one shared claim
            claims = self.need.per_pod  # the shared claims are held from the first pod on
        return count, frozenset(taken - held)
