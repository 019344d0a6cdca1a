"""A small scheduler: which node a pod fits on, and the real scheduler's words when none."""

from __future__ import annotations

import collections
from typing import Any

GPU = "nvidia.com/gpu"
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def _container_gpus(container: dict[str, Any]) -> int:
    resources = container.get("resources") or {}
    # Extended resources: a limit implies an equal request.
    value = (resources.get("requests") or {}).get(GPU) or (resources.get("limits") or {}).get(GPU)
    return 0 if value is None else int(str(value))


def gpu_request(pod: dict[str, Any]) -> int:
    """The pod's effective GPU request, as the scheduler counts it: the app containers' sum,
    or the largest init container's when that is larger (init containers run one at a time,
    before the app containers)."""
    spec = pod.get("spec") or {}
    apps = sum(_container_gpus(c) for c in spec.get("containers") or [])
    inits = [_container_gpus(c) for c in spec.get("initContainers") or []]
    return max([apps, *inits])


def node_gpus(node: dict[str, Any]) -> int:
    return int(str((node.get("status") or {}).get("allocatable", {}).get(GPU, "0")))


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


def failure_reason(pod: dict[str, Any], node: dict[str, Any], allocated: int) -> str | None:
    """The first filter that rejects the node, in the default scheduler's plugin order."""
    reason = static_reason(pod, node)
    if reason:
        return reason
    wanted = gpu_request(pod)
    if wanted and node_gpus(node) - allocated < wanted:
        return f"Insufficient {GPU}"
    return None


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
    pod: dict[str, Any], nodes: list[dict[str, Any]], allocated: dict[str, int]
) -> tuple[str | None, str]:
    """The node to bind to (the one with the least free GPUs that fits: bin-packing keeps whole
    nodes free for gang jobs), or None and the Unschedulable message."""
    eligible, reasons = static_filter(pod, nodes)
    capacities = [(n["metadata"]["name"], node_gpus(n)) for n in eligible]
    return choose_among(pod, capacities, reasons, len(nodes), allocated)


def choose_among(
    pod: dict[str, Any],
    capacities: list[tuple[str, int]],
    static_reasons: collections.Counter[str],
    total: int,
    allocated: dict[str, int],
) -> tuple[str | None, str]:
    """`choose_node` once the filters before resources have run: `capacities` are the
    (name, GPUs) of the nodes that passed them."""
    wanted = gpu_request(pod)
    best: tuple[int, str] | None = None
    short = beyond = 0
    for name, capacity in capacities:
        free = capacity - allocated.get(name, 0)
        if wanted and free < wanted:
            short += 1
            beyond += wanted > capacity  # more than the whole node: no eviction helps
            continue
        if best is None or (free, name) < best:
            best = (free, name)
    if best is not None:
        return best[1], ""
    reasons = collections.Counter(static_reasons)
    if short:
        reasons[f"Insufficient {GPU}"] += short
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
