"""Allocating a pod's claims on one node, as the scheduler's structured allocator does (pure).

The facts relied on, from `k8s.io/dynamic-resource-allocation/structured`:

- The devices a node can use are those of complete pools published for it (its own slices,
  and slices for all nodes or for a selector that takes it), minus devices some claim holds.
- A device fits a request when every selector of the request's DeviceClass and every
  selector of the request is true for it. A selector that fails on a device (a CEL runtime
  error) fails the allocation.
- `ExactCount` takes `count` devices; `All` takes every device that fits, and fails if there
  is none or if any of them is held.
- `firstAvailable` tries its alternatives in order and takes the first that can be
  satisfied together with everything else.
- `matchAttribute` wants every device of the requests it names (all of the claim's when it
  names none) to carry the attribute, with one value.
- The search is depth-first with backtracking over requests and devices, so two claims of
  one pod, or a constraint, can push a request onto other devices. It gives up after
  `MAX_STEPS` tries ("timed out trying to allocate devices").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pools.core.dra.claims import ALL, ClaimSpec, DeviceChoice, MatchConstraint
from pools.core.dra.inventory import Device, DeviceId
from pools.core.dra.selectors import SelectorCache, SelectorError

MAX_STEPS = 100_000


class AllocationError(Exception):
    """The allocator stopped with an error rather than a "no": its message is the scheduler's."""


class Allocator:
    """Claims on a node's devices. `classes`: DeviceClass name -> its selectors."""

    def __init__(self, classes: Mapping[str, tuple[str, ...]], cache: SelectorCache | None = None):
        self.classes = classes
        self.cache = cache or SelectorCache()
        # The devices of a list that fit a choice, by (choice, the list's id), the list kept
        # with them so its id cannot be another's: a check asks again for every pool and
        # every replica, of the same lists.
        self._candidates: dict[tuple[DeviceChoice, int], tuple[object, list[Device]]] = {}

    def candidates(self, choice: DeviceChoice, devices: Sequence[Device]) -> list[Device]:
        key = (choice, id(devices))
        found = self._candidates.get(key)
        if found is None or found[0] is not devices:
            found = self._candidates[key] = (devices, [d for d in devices if self.fits(choice, d)])
        return found[1]

    def fits(self, choice: DeviceChoice, device: Device) -> bool:
        owners = (
            (f"class {choice.device_class}", self.classes.get(choice.device_class, ())),
            (f"request {choice.name}", choice.selectors),
        )
        for owner, expressions in owners:
            for i, expression in enumerate(expressions):
                try:
                    if not self.cache.matches(expression, device):
                        return False
                except SelectorError as error:
                    raise AllocationError(
                        f"{owner}: selector #{i} on device {_name(device)}: {error}"
                    ) from None
        return True

    def allocate(
        self,
        claims: Sequence[ClaimSpec],
        devices: Sequence[Device],
        taken: frozenset[DeviceId] | set[DeviceId] = frozenset(),
    ) -> list[list[DeviceId]] | None:
        """The devices of each claim, or None when the claims cannot all be allocated here."""
        if not claims:
            return []
        if not devices:
            return None
        search = _Search(self, claims, devices, taken)
        if not search.requests(0):
            return None
        result: list[list[DeviceId]] = [[] for _ in claims]
        for device, claim in search.picked.items():
            result[claim].append(device)
        return result


Undo = list[tuple[int, int]]  # the constraint values a step set, to take back


class _Search:
    """One depth-first search: requests in order, devices in order, backtracking."""

    def __init__(
        self,
        allocator: Allocator,
        claims: Sequence[ClaimSpec],
        devices: Sequence[Device],
        taken: frozenset[DeviceId] | set[DeviceId],
    ) -> None:
        self.allocator = allocator
        self.claims = claims
        self.slots = [(c, request) for c, claim in enumerate(claims) for request in claim.requests]
        self.devices = devices
        self.taken = taken
        self.picked: dict[DeviceId, int] = {}  # device -> claim index
        self.values: dict[tuple[int, int], object] = {}  # (claim, constraint) -> value
        self.steps = 0

    def requests(self, k: int) -> bool:
        """Whether requests k.. can all be satisfied on top of what is picked."""
        if k == len(self.slots):
            return True
        c, request = self.slots[k]
        for choice in request.choices:
            candidates = self.allocator.candidates(choice, self.devices)
            if choice.mode == ALL:
                if self._all(k, c, choice, candidates):
                    return True
                continue
            free = [d for d in candidates if d.id not in self.taken]
            if self._pick(k, c, choice, free, 0, choice.count):
                return True
        return False

    def _all(self, k: int, c: int, choice: DeviceChoice, candidates: list[Device]) -> bool:
        if not candidates or any(d.id in self.taken or d.id in self.picked for d in candidates):
            return False
        added: Undo = []
        for n, device in enumerate(candidates):
            undo = self._constrain(c, choice, device)
            if undo is None:
                self._drop(candidates[:n], added)
                return False
            added += undo
            self.picked[device.id] = c
        if self.requests(k + 1):
            return True
        self._drop(candidates, added)
        return False

    def _pick(
        self, k: int, c: int, choice: DeviceChoice, free: list[Device], start: int, left: int
    ) -> bool:
        if left == 0:
            return self.requests(k + 1)
        for i in range(start, len(free) - left + 1):
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise AllocationError("timed out trying to allocate devices")
            device = free[i]
            if device.id in self.picked:
                continue
            undo = self._constrain(c, choice, device)
            if undo is None:
                continue
            self.picked[device.id] = c
            if self._pick(k, c, choice, free, i + 1, left - 1):
                return True
            self._drop([device], undo)
        return False

    def _drop(self, devices: Sequence[Device], undo: Undo) -> None:
        for device in devices:
            del self.picked[device.id]
        for key in undo:
            del self.values[key]

    def _constrain(self, c: int, choice: DeviceChoice, device: Device) -> Undo | None:
        """Checks the claim's constraints for this device: the values it set first, or None
        (and nothing set) when a constraint refuses the device."""
        set_here: Undo = []
        constraints: Sequence[MatchConstraint] = self.claims[c].constraints
        for j, constraint in enumerate(constraints):
            if not constraint.covers(choice):
                continue
            value = device.attribute(constraint.attribute)
            key = (c, j)
            if value is None or self.values.get(key, value) != value:
                for done in set_here:
                    del self.values[done]
                return None
            if key not in self.values:
                self.values[key] = value
                set_here.append(key)
        return set_here


def _name(device: Device) -> str:
    return f"{device.driver}/{device.pool}/{device.name}"
