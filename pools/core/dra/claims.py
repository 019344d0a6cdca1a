"""ResourceClaims, their templates and DeviceClasses, as the allocator reads them (pure).

`read_claim_spec` reads `spec` of a ResourceClaim (or `spec.spec` of a template) and names
every field the API server would refuse, as the fit check reports manifest fields:

    requests[i].name                       required, unique
    requests[i].exactly | firstAvailable    exactly one of the two
      deviceClassName                      required
      selectors[j].cel.expression          CEL over `device` (pools.core.dra.selectors)
      allocationMode                       ExactCount (default) or All
      count                                ExactCount only, 1 by default
    constraints[k].requests                names of requests (or request/subrequest)
    constraints[k].matchAttribute          a qualified attribute name: domain/name
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pools.core.dra.selectors import SelectorError, compile_selector
from pools.core.fit import fields as f
from pools.core.fit.fields import FieldReader

EXACT_COUNT = "ExactCount"
ALL = "All"
MODES = (EXACT_COUNT, ALL)
MAX_COUNT = 32  # resource.k8s.io/v1: AllocationResultsMaxSize


@dataclass(frozen=True)
class DeviceChoice:
    """What one request (or one of its `firstAvailable` alternatives) asks for."""

    name: str  # "gpu", or "gpu/big" for a subrequest
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    choices: tuple[DeviceChoice, ...]  # one for `exactly`, the alternatives in order otherwise


@dataclass(frozen=True)
class MatchConstraint:
    requests: tuple[str, ...]  # empty: every request of the claim
    attribute: str  # domain/name

    def covers(self, choice: DeviceChoice) -> bool:
        if not self.requests:
            return True
        request = choice.name.split("/", 1)[0]
        return request in self.requests or choice.name in self.requests


@dataclass(frozen=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchConstraint, ...] = ()

    @property
    def classes(self) -> tuple[tuple[str, str], ...]:
        """(request name, class) for every class the claim names."""
        return tuple(
            (c.name.split("/")[0], c.device_class) for r in self.requests for c in r.choices
        )


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's `spec.resourceClaims`, and the claim it stands for when the
    manifest itself carries the claim or the template."""

    name: str
    namespace: str
    claim_name: str = ""  # resourceClaimName: a claim the pods share
    template_name: str = ""  # resourceClaimTemplateName: one claim per pod
    spec: ClaimSpec | None = None  # from the manifest; None: looked up in the cluster
    pod: str = ""  # namespace/name of the pod, as the scheduler's messages name it

    @property
    def shared(self) -> bool:
        return bool(self.claim_name)


def read_claim_spec(reader: FieldReader, spec: object, path: str) -> ClaimSpec:
    body = reader.mapping(spec, path)
    devices_path = f.child(path, "devices")
    devices = reader.mapping(body.get("devices"), devices_path)
    requests_path = f.child(devices_path, "requests")
    requests = []
    seen: set[str] = set()
    for i, raw in enumerate(reader.sequence(devices.get("requests"), requests_path)):
        at = f.index(requests_path, i)
        request = _read_request(reader, raw, at)
        if request.name in seen:
            reader.problem(f.child(at, "name"), f"Duplicate value: {request.name!r}")
        seen.add(request.name)
        requests.append(request)
    constraints_path = f.child(devices_path, "constraints")
    constraints = []
    for i, raw in enumerate(reader.sequence(devices.get("constraints"), constraints_path)):
        at = f.index(constraints_path, i)
        item = reader.mapping(raw, at)
        names = tuple(reader.strings(item.get("requests"), f.child(at, "requests")))
        for j, name in enumerate(names):
            if name.split("/", 1)[0] not in seen:
                reader.problem(
                    f.index(f.child(at, "requests"), j),
                    f"Invalid value: {name!r}: must be the name of a request in the claim",
                )
        attribute = reader.string(item.get("matchAttribute"), f.child(at, "matchAttribute"))
        if not attribute:
            reader.problem(
                f.child(at, "matchAttribute"), "Required value: the fit check reads matchAttribute"
            )
        elif "/" not in attribute:
            reader.problem(
                f.child(at, "matchAttribute"),
                f"Invalid value: {attribute!r}: must be a fully qualified name (domain/name)",
            )
        constraints.append(MatchConstraint(names, attribute))
    return ClaimSpec(tuple(requests), tuple(constraints))


def _read_request(reader: FieldReader, raw: object, path: str) -> DeviceRequest:
    item = reader.mapping(raw, path)
    name = reader.string(item.get("name"), f.child(path, "name"))
    if not name:
        reader.problem(f.child(path, "name"), "Required value")
    exactly, first = item.get("exactly"), item.get("firstAvailable")
    if (exactly is None) == (first is None):
        reader.problem(path, "Invalid value: exactly one of exactly or firstAvailable is required")
        return DeviceRequest(name, ())
    if exactly is not None:
        return DeviceRequest(name, (_read_choice(reader, exactly, f.child(path, "exactly"), name),))
    first_path = f.child(path, "firstAvailable")
    choices = []
    for i, sub in enumerate(reader.sequence(first, first_path)):
        at = f.index(first_path, i)
        sub_name = reader.string(reader.mapping(sub, at).get("name"), f.child(at, "name"))
        if not sub_name:
            reader.problem(f.child(at, "name"), "Required value")
        choices.append(_read_choice(reader, sub, at, f"{name}/{sub_name}"))
    if not choices:
        reader.problem(first_path, "Required value: at least one alternative")
    return DeviceRequest(name, tuple(choices))


def _read_choice(reader: FieldReader, raw: object, path: str, name: str) -> DeviceChoice:
    item = reader.mapping(raw, path)
    device_class = reader.string(item.get("deviceClassName"), f.child(path, "deviceClassName"))
    if not device_class:
        reader.problem(f.child(path, "deviceClassName"), "Required value")
    selectors = read_selectors(reader, item.get("selectors"), f.child(path, "selectors"))
    mode = reader.string(item.get("allocationMode"), f.child(path, "allocationMode")) or EXACT_COUNT
    if mode not in MODES:
        reader.problem(
            f.child(path, "allocationMode"),
            f'Unsupported value: "{mode}": supported values: "{ALL}", "{EXACT_COUNT}"',
        )
    count = 1
    if item.get("count") is not None:
        count = reader.integer(item.get("count"), f.child(path, "count"), 1, minimum=1)
        if mode == ALL:
            reader.problem(
                f.child(path, "count"), "Invalid value: must not be set when allocationMode is All"
            )
        elif count > MAX_COUNT:
            reader.problem(
                f.child(path, "count"),
                f"Invalid value: {count}: must be less than or equal to {MAX_COUNT}",
            )
    return DeviceChoice(name, device_class, selectors, mode, count)


def read_selectors(reader: FieldReader, raw: object, path: str) -> tuple[str, ...]:
    expressions = []
    for i, item in enumerate(reader.sequence(raw, path)):
        at = f.child(f.child(f.index(path, i), "cel"), "expression")
        body = reader.mapping(item, f.index(path, i))
        expression = reader.string(reader.mapping(body.get("cel"), at).get("expression"), at)
        if not expression:
            reader.problem(at, "Required value")
            continue
        try:
            compile_selector(expression)
        except SelectorError as error:
            reader.problem(at, f"Invalid value: {error}")
        expressions.append(expression)
    return tuple(expressions)


def read_pod_claims(
    reader: FieldReader, spec: Mapping[str, Any], path: str, namespace: str
) -> tuple[PodClaim, ...]:
    """`spec.resourceClaims` of a pod spec."""
    at = f.child(path, "resourceClaims")
    claims = []
    for i, raw in enumerate(reader.sequence(spec.get("resourceClaims"), at)):
        item_path = f.index(at, i)
        item = reader.mapping(raw, item_path)
        name = reader.string(item.get("name"), f.child(item_path, "name"))
        claim = reader.string(
            item.get("resourceClaimName"), f.child(item_path, "resourceClaimName")
        )
        template = reader.string(
            item.get("resourceClaimTemplateName"), f.child(item_path, "resourceClaimTemplateName")
        )
        if bool(claim) == bool(template):
            reader.problem(
                item_path,
                "Invalid value: exactly one of resourceClaimName or resourceClaimTemplateName "
                "is required",
            )
        claims.append(PodClaim(name, namespace or "default", claim, template))
    return tuple(claims)


def class_selectors(device_class: Mapping[str, Any]) -> tuple[str, ...]:
    """A DeviceClass object's CEL selectors (the API server has validated them)."""
    return read_selectors(FieldReader(), (device_class.get("spec") or {}).get("selectors"), "spec")
