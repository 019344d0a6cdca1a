"""A small scheduler: which node a pod fits on, and the real scheduler's words when none.

Resources are counted as NodeResourcesFit counts extended resources: every resource name
with a domain outside kubernetes.io (nvidia.com/gpu, nvidia.com/mig-1g.10gb,
nvidia.com/gpu.shared, ...) a pod asks for must be left on the node's allocatable after
the requests of the pods bound to it. CPU and memory are not counted.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from kubesim import mig, sharing

GPU = mig.GPU_RESOURCE
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"

Resources = Mapping[str, int]  # extended resource name -> count
_NOTHING: Resources = {}


def is_extended(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a name with a domain, not kubernetes.io's."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_gpu_device(name: str) -> bool:
    """A resource whose every unit is a device the exporter reports on: a GPU, a MIG
    instance (the mixed strategy), or a shared GPU's replica (renamed)."""
    return name in (GPU, sharing.SHARED_RESOURCE) or name.startswith(mig.RESOURCE_PREFIX)


def _container_requests(container: dict[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits"), resources.get("requests")
    # Extended resources: a limit implies an equal request (and a request needs the limit).
    asked = {**limits, **requests} if limits and requests else limits or requests or {}
    return {name: _count(value) for name, value in asked.items() if is_extended(name)}


def extended_request(pod: dict[str, Any]) -> dict[str, int]:
    """The pod's effective request of each extended resource, as the scheduler counts it:
    the app containers' sum, or the largest init container's when that is larger (init
    containers run one at a time, before the app containers). Zero requests are dropped:
    the filter skips them."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    inits = spec.get("initContainers") or []
    if len(containers) == 1 and not inits:  # most pods: no sums to make
        return {k: n for k, n in _container_requests(containers[0]).items() if n > 0}
    total: collections.Counter[str] = collections.Counter()
    for container in containers:
        total.update(_container_requests(container))
    for container in inits:
        for name, count in _container_requests(container).items():
            total[name] = max(total[name], count)
    return {name: count for name, count in total.items() if count > 0}


def gpu_request(pod: dict[str, Any]) -> int:
    """The GPU devices the pod holds: whole GPUs, MIG instances or shared replicas (a node
    offers one kind, so the kinds add up to the devices it takes there)."""
    return devices_of(extended_request(pod))


def _count(value: Any) -> int:
    """An extended resource's quantity (whole units: validation refuses others)."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def node_resources(node: dict[str, Any]) -> dict[str, int]:
    """The node's allocatable extended resources."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {name: _count(value) for name, value in allocatable.items() if is_extended(name)}


def node_gpus(node: dict[str, Any]) -> int:
    """The GPU devices the node advertises (GPUs, MIG instances or replicas)."""
    return devices_of(node_resources(node))


def devices_of(resources: Resources) -> int:
    """The GPU devices among extended resources."""
    return sum(n for name, n in resources.items() if is_gpu_device(name))


def is_active(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists":
            return True
        if (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _match_expression(labels: dict[str, str], expression: dict[str, Any]) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def _match_field(name: str, requirement: dict[str, Any]) -> bool:
    # The only field a node selector term may name is metadata.name, with In or NotIn.
    if requirement.get("key") != "metadata.name":
        return False
    values = requirement.get("values") or []
    if requirement.get("operator") == "In":
        return name in values
    if requirement.get("operator") == "NotIn":
        return name not in values
    return False


def _matches_term(term: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    return all(_match_expression(labels, e) for e in expressions) and all(
        _match_field(name, f) for f in fields
    )


def matches_affinity(pod: dict[str, Any], labels: dict[str, str], name: str = "") -> bool:
    spec = pod.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    # Terms are ORed; the requirements inside one term are ANDed.
    return any(_matches_term(t, name, labels) for t in required.get("nodeSelectorTerms") or [])


def _taint_text(taint: dict[str, Any]) -> str:
    return f"{{{taint.get('key')}: {taint.get('value') or ''}}}"


def static_reason(pod: dict[str, Any], node: dict[str, Any]) -> str | None:
    """The first filter that rejects the node before resources are counted, in the default
    scheduler's plugin order (unschedulable, taints, node affinity)."""
    spec = node.get("spec") or {}
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    # NodeUnschedulable lets a pod that tolerates the cordon's taint onto a cordoned node.
    if spec.get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
        return "node(s) were unschedulable"
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {_taint_text(taint)}"
    metadata = node.get("metadata") or {}
    if not matches_affinity(pod, metadata.get("labels") or {}, metadata.get("name") or ""):
        return "node(s) didn't match Pod's node affinity/selector"
    return None


def failure_reason(pod: dict[str, Any], node: dict[str, Any], allocated: Resources) -> str | None:
    """The first filter that rejects the node, in the default scheduler's plugin order."""
    reason = static_reason(pod, node)
    if reason:
        return reason
    missing = _missing(extended_request(pod), node_resources(node), allocated)
    return f"Insufficient {missing[0]}" if missing else None


def _missing(wanted: Resources, allocatable: Resources, used: Resources) -> list[str]:
    """The resources the node has too few of left, in the pod's order."""
    return [
        name
        for name, count in wanted.items()
        if allocatable.get(name, 0) - used.get(name, 0) < count
    ]


def static_filter(
    pod: dict[str, Any], nodes: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], collections.Counter[str]]:
    """The nodes that pass the filters before resources, and why the others did not."""
    eligible, reasons = [], collections.Counter[str]()
    for node in nodes:
        reason = static_reason(pod, node)
        if reason:
            reasons[reason] += 1
        else:
            eligible.append(node)
    return eligible, reasons


def choose_node(
    pod: dict[str, Any], nodes: list[dict[str, Any]], allocated: Mapping[str, Resources]
) -> tuple[str | None, str]:
    """The node to bind to (the one with the least free GPUs that fits: bin-packing keeps whole
    nodes free for gang jobs), or None and the Unschedulable message."""
    eligible, reasons = static_filter(pod, nodes)
    capacities = [(n["metadata"]["name"], node_resources(n)) for n in eligible]
    return choose_among(pod, capacities, reasons, len(nodes), allocated)


def choose_among(
    pod: dict[str, Any],
    capacities: list[tuple[str, Resources]],
    static_reasons: collections.Counter[str],
    total: int,
    allocated: Mapping[str, Resources],
) -> tuple[str | None, str]:
    """`choose_node` once the filters before resources have run: `capacities` are the
    (name, allocatable extended resources) of the nodes that passed them. The free units of
    what the pod asks for (of its GPU devices when it asks for none) rank the nodes."""
    wanted = extended_request(pod)
    asks = list(wanted.items())
    best: tuple[int, str] | None = None
    lacking: collections.Counter[str] = collections.Counter()  # resource -> nodes short of it
    short = beyond = 0
    # One pass over the nodes, the asks inlined: a thousand-node cluster's queue of jobs
    # runs it once a pod.
    for name, allocatable in capacities:
        used = allocated.get(name) or _NOTHING
        free = missing = 0
        hopeless = False
        for resource, count in asks:
            have = allocatable.get(resource, 0)
            left = have - used.get(resource, 0)
            if left < count:
                # Every resource the node lacks is a reason of its own, as NodeResourcesFit
                # reports them; more than the whole node has is one no eviction can help
                # (UnschedulableAndUnresolvable).
                lacking[resource] += 1
                missing += 1
                hopeless = hopeless or count > have
            free += left
        if missing:
            short += 1
            beyond += hopeless
            continue
        if not asks:
            free = devices_of(allocatable) - devices_of(used)
        if best is None or (free, name) < best:
            best = (free, name)
    if best is not None:
        return best[1], ""
    reasons = collections.Counter(static_reasons)
    for resource, nodes in lacking.items():
        reasons[f"Insufficient {resource}"] += nodes
    # DefaultPreemption: the filters before resources cannot be helped; a node short of GPUs
    # could be, by evicting lower-priority pods, which kubesim never does.
    preemption = collections.Counter(
        {NOT_HELPFUL: total - short + beyond, NO_VICTIMS: short - beyond}
    )
    return None, f"{fit_error(total, reasons)} preemption: {fit_error(total, preemption)}"


def fit_error(total: int, reasons: collections.Counter[str]) -> str:
    """FitError.Error(): the "count reason" strings sorted as strings (so "11 ..." comes
    before "4 ..."), after `0/N nodes are available: `."""
    listed = sorted(f"{count} {reason}" for reason, count in reasons.items() if count)
    if not listed:
        return f"0/{total} nodes are available."
    return f"0/{total} nodes are available: {', '.join(listed)}."


def claims_reason(pod: dict[str, Any], total: int) -> str:
    """A pod with ResourceClaims on kubesim's own API server, which has no resourceclaim
    controller and allocates no claim: the DynamicResources plugin's PreFilter words for the
    first claim, as a real scheduler says them when the claim was never made (a template's)
    or does not exist (a named one)."""
    first = pod["spec"]["resourceClaims"][0]
    meta = pod["metadata"]
    if first.get("resourceClaimName"):
        reason = f'resourceclaim.resource.k8s.io "{first["resourceClaimName"]}" not found'
    else:
        pod_name = f"{meta.get('namespace', 'default')}/{meta['name']}"
        reason = f'pod "{pod_name}": ResourceClaim not created yet'
    preemption = fit_error(total, collections.Counter({NOT_HELPFUL: total}))
    return f"0/{total} nodes are available: {reason}. preemption: {preemption}"
