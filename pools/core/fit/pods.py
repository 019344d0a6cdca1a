"""A pod spec reduced to what the scheduler's filters look at (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pools.core.dra.claims import PodClaim, read_pod_claims
from pools.core.fit import fields as f
from pools.core.fit.fields import FieldReader
from pools.core.fit.findings import Finding
from pools.core.fit.resources import ZERO, Resources, read_pod_resources
from pools.core.fit.scheduling import NodePlacement, Toleration, read_placement, read_tolerations

DEFAULT_SCHEDULER = "default-scheduler"
PREEMPT_NEVER = "Never"
# The API server's built-in classes; any other name needs a PriorityClass object in the cluster.
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2000000000,
    "system-node-critical": 2000001000,
}


@dataclass(frozen=True)
class PodShape:
    requests: Resources = ZERO
    tolerations: tuple[Toleration, ...] = ()
    placement: NodePlacement = field(default_factory=NodePlacement)
    priority_class: str = ""
    priority: int | None = None  # spec.priority when the manifest sets it
    preemption_policy: str = ""
    node_name: str = ""
    scheduler_name: str = ""
    gpu_limit_only: tuple[str, ...] = ()  # containers with a GPU limit and no GPU request
    claims: tuple[PodClaim, ...] = ()  # spec.resourceClaims (DRA)

    @property
    def for_scheduling(self) -> PodShape:
        """The shape without what is advice only (which containers lack a GPU request):
        templates that differ only there are filtered once (`check.Evaluations`)."""
        return replace(self, gpu_limit_only=()) if self.gpu_limit_only else self

    def priority_value(self, classes: Mapping[str, int], default: int = 0) -> int:
        """The priority admission would give the pod: spec.priority, else its class's value."""
        if self.priority is not None:
            return self.priority
        if self.priority_class:
            known = {**SYSTEM_PRIORITY_CLASSES, **classes}
            return known.get(self.priority_class, default)
        return default


def read_pod_shape(
    reader: FieldReader, spec: Mapping[str, Any], path: str, findings: list[Finding]
) -> PodShape:
    resources = read_pod_resources(reader, spec, path)
    findings += resources.findings
    priority = spec.get("priority")
    return PodShape(
        requests=resources.requests,
        tolerations=read_tolerations(reader, spec, path, findings),
        placement=read_placement(reader, spec, path, findings),
        priority_class=reader.string(
            spec.get("priorityClassName"), f.child(path, "priorityClassName")
        ),
        priority=None
        if priority is None
        else reader.integer(priority, f.child(path, "priority"), 0, minimum=-(2**31)),
        preemption_policy=reader.string(
            spec.get("preemptionPolicy"), f.child(path, "preemptionPolicy")
        ),
        node_name=reader.string(spec.get("nodeName"), f.child(path, "nodeName")),
        scheduler_name=reader.string(spec.get("schedulerName"), f.child(path, "schedulerName")),
        gpu_limit_only=tuple(resources.gpu_limit_only),
        claims=read_pod_claims(reader, spec, path, ""),
    )
