"""What a pod requests, as the scheduler adds it up, and what the API server says about it (pure).

The facts relied on, from Kubernetes:

- Defaulting (`SetDefaults_Pod`): a container with a limit and no request for a resource gets
  a request equal to the limit. It happens before validation.
- Validation (`ValidateResourceRequirements`): quantities are not negative; extended resources
  (a name with a domain outside `kubernetes.io`, like `nvidia.com/gpu`) are whole numbers and
  cannot be overcommitted, so their request must equal their limit ("must be equal to
  nvidia.com/gpu limit of 2") and a request needs a limit ("Limit must be set for non
  overcommitable resources"); other requests may not exceed their limit.
- The scheduler's pod request (`resource.PodRequests`, used by NodeResourcesFit): the sum of the
  app containers, with each sidecar (an init container with `restartPolicy: Always`) added to
  it; the larger of that and each ordinary init container (plus the sidecars started before
  it), resource by resource; then the pod overhead. CPU counts in millicores rounded up,
  everything else in whole units rounded up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pools.core.fit import fields as f
from pools.core.fit.fields import FieldReader
from pools.core.fit.findings import ERROR, INFO, Finding
from pools.core.fit.quantities import (
    Quantity,
    QuantityError,
    milli_value,
    parse_quantity,
    whole_value,
)

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"
STANDARD_CONTAINER_RESOURCES = frozenset({CPU, MEMORY, "ephemeral-storage"})


@dataclass(frozen=True)
class Resources:
    """Amounts in the scheduler's units: millicores, bytes, GPUs, and every other resource by
    name in whole units (`extended`, sorted by name)."""

    cpu_milli: int = 0
    memory: int = 0
    gpu: int = 0
    extended: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, amounts: Mapping[str, int]) -> Resources:
        others = {k: v for k, v in amounts.items() if k not in (CPU, MEMORY, GPU)}
        return cls(
            amounts.get(CPU, 0), amounts.get(MEMORY, 0), amounts.get(GPU, 0), _sorted(others)
        )

    def as_amounts(self) -> dict[str, int]:
        return {CPU: self.cpu_milli, MEMORY: self.memory, GPU: self.gpu, **dict(self.extended)}

    def plus(self, other: Resources) -> Resources:
        if not self.extended and not other.extended:
            return Resources(
                self.cpu_milli + other.cpu_milli, self.memory + other.memory, self.gpu + other.gpu
            )
        return self._combine(other, lambda a, b: a + b)

    def minus(self, other: Resources) -> Resources:
        if not self.extended and not other.extended:
            return Resources(
                self.cpu_milli - other.cpu_milli, self.memory - other.memory, self.gpu - other.gpu
            )
        return self._combine(other, lambda a, b: a - b)

    def at_least(self, other: Resources) -> Resources:
        return self._combine(other, max)

    def _combine(self, other: Resources, how: Any) -> Resources:
        extended = dict(self.extended)
        for name, amount in other.extended:
            extended[name] = how(extended.get(name, 0), amount)
        for name in dict(self.extended).keys() - dict(other.extended).keys():
            extended[name] = how(extended[name], 0)
        return Resources(
            how(self.cpu_milli, other.cpu_milli),
            how(self.memory, other.memory),
            how(self.gpu, other.gpu),
            _sorted(extended),
        )

    @property
    def is_zero(self) -> bool:
        return not (self.cpu_milli or self.memory or self.gpu or any(v for _, v in self.extended))

    def as_dict(self) -> dict[str, int]:
        return {name: amount for name, amount in self.as_amounts().items() if amount}


def _sorted(amounts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(amounts.items()))


ZERO = Resources()


def amount_in_units(resource: str, quantity: Quantity) -> int:
    return milli_value(quantity.value) if resource == CPU else whole_value(quantity.value)


def amount_or_zero(resource: str, raw: object) -> int:
    """A quantity as an object or a row holds it, in the scheduler's units (millicores for
    CPU); 0 when absent or malformed (what the API server stored has parsed already: this
    is for rows and objects read back, not for input to refuse)."""
    try:
        return amount_in_units(resource, parse_quantity(raw if raw not in (None, "") else "0"))
    except QuantityError:
        return 0


@dataclass
class PodResources:
    """A pod spec's resources as read: the scheduler's request and what to say about them."""

    requests: Resources = ZERO
    findings: list[Finding] = field(default_factory=list)
    gpu_limit_only: list[str] = field(default_factory=list)  # container paths


def read_pod_resources(reader: FieldReader, spec: Mapping[str, Any], path: str) -> PodResources:
    result = PodResources()
    app = ZERO
    containers = reader.sequence(spec.get("containers"), f.child(path, "containers"))
    for position, container in enumerate(containers):
        at = f.index(f.child(path, "containers"), position)
        app = app.plus(_container_requests(reader, container, at, result))
    sidecars, init_peak = ZERO, ZERO
    inits = reader.sequence(spec.get("initContainers"), f.child(path, "initContainers"))
    for position, container in enumerate(inits):
        at = f.index(f.child(path, "initContainers"), position)
        requests = _container_requests(reader, container, at, result)
        if isinstance(container, dict) and container.get("restartPolicy") == "Always":
            # A sidecar keeps running next to the app containers and the later init containers.
            app = app.plus(requests)
            sidecars = sidecars.plus(requests)
            init_peak = init_peak.at_least(sidecars)
        else:
            init_peak = init_peak.at_least(requests.plus(sidecars))
    overhead_path = f.child(path, "overhead")
    overhead = _amounts(_resource_list(reader, spec.get("overhead"), overhead_path, result))
    result.requests = app.at_least(init_peak).plus(Resources.of(overhead))
    return result


def _container_requests(
    reader: FieldReader, container: object, path: str, result: PodResources
) -> Resources:
    body = reader.mapping(container, path)
    resources = reader.mapping(body.get("resources"), f.child(path, "resources"))
    base = f.child(path, "resources")
    limits = _resource_list(reader, resources.get("limits"), f.child(base, "limits"), result)
    requests = _resource_list(reader, resources.get("requests"), f.child(base, "requests"), result)
    result.findings += _requirement_findings(limits, requests, base)
    if GPU in limits and GPU not in requests:
        result.gpu_limit_only.append(path)
    defaulted = {**limits, **requests}
    return Resources.of(_amounts(defaulted))


def _amounts(quantities: Mapping[str, Quantity]) -> dict[str, int]:
    return {name: amount_in_units(name, q) for name, q in quantities.items()}


def _resource_list(
    reader: FieldReader, value: object, path: str, result: PodResources
) -> dict[str, Quantity]:
    quantities: dict[str, Quantity] = {}
    for name, raw in reader.mapping(value, path).items():
        at = f.key(path, str(name))
        try:
            quantity = parse_quantity(raw)
        except QuantityError as error:
            reader.problem(at, f"{f.quoted(raw)} is not a quantity: {error}")
            continue
        name = str(name)
        if problem := resource_name_problem(name):
            result.findings.append(Finding("invalid-resource", ERROR, f"{at}: {problem}", path=at))
            continue
        if problem := quantity_problem(name, quantity):
            # Refused, as the API server would: a GPU count of -1 would otherwise "fit".
            reader.problem(at, f"Invalid value: {f.quoted(str(quantity))}: {problem}")
            continue
        quantities[name] = quantity
    return quantities


def resource_name_problem(name: str) -> str:
    standard = name in STANDARD_CONTAINER_RESOURCES or name.startswith("hugepages-")
    if "/" not in name and not standard:
        return f"Invalid value: {f.quoted(name)}: must be a standard resource for containers"
    return ""


def is_overcommit_allowed(name: str) -> bool:
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def quantity_problem(name: str, quantity: Quantity) -> str | None:
    """What ValidateResourceRequirements refuses in one amount, or None."""
    if quantity.value < 0:
        return "must be greater than or equal to 0"
    if quantity.value.denominator != 1 and not is_overcommit_allowed(name):
        return "must be an integer"
    return None


def _requirement_findings(
    limits: Mapping[str, Quantity], requests: Mapping[str, Quantity], path: str
) -> list[Finding]:
    findings = []
    requests_path, limits_path = f.child(path, "requests"), f.child(path, "limits")
    for name, request in requests.items():
        limit = limits.get(name)
        text = f.quoted(str(request)) if limit is None or request.value != limit.value else ""
        if limit is None:
            if not is_overcommit_allowed(name):
                message = (
                    f"{limits_path}: Required value: Limit must be set for non overcommitable "
                    f"resources ({name} is requested without a limit)"
                )
                findings.append(Finding("request-without-limit", ERROR, message, path=limits_path))
        elif request.value != limit.value and not is_overcommit_allowed(name):
            message = (
                f"{requests_path}: Invalid value: {text}: must be equal to {name} limit of {limit}"
            )
            findings.append(Finding("request-not-limit", ERROR, message, path=requests_path))
        elif request.value > limit.value:
            message = (
                f"{requests_path}: Invalid value: {text}: must be less than or equal to {name} "
                f"limit of {limit}"
            )
            findings.append(Finding("request-above-limit", ERROR, message, path=requests_path))
    return findings


def gpu_limit_only_finding(paths: list[str], gpus: int) -> Finding:
    where = ", ".join(paths)
    message = (
        f"{where}: nvidia.com/gpu has a limit and no request; that is fine — Kubernetes sets "
        f"the request to the limit ({gpus} GPU{'s' if gpus != 1 else ''} for the pod), and "
        "extended resources cannot be overcommitted anyway."
    )
    return Finding("gpu-limit-defaults-request", INFO, message, path=paths[0])
