"""Kubernetes API objects (as decoded JSON) turned into the fit check's inputs (pure).

For the edges that hold raw Node and Pod objects — the watcher's cache, a test reading
kubesim — so they all count a node's requests the way the scheduler does: every pod bound to
the node that has not finished (phase not Succeeded or Failed), its request computed like the
scheduler's (limits defaulting requests, init containers, sidecars, overhead).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pools.core.fit.cluster import NO_POOL, FitNode, NodePod
from pools.core.fit.fields import FieldReader
from pools.core.fit.resources import Resources, amount_or_zero, read_pod_resources
from pools.core.taints import Taint

FINISHED = ("Succeeded", "Failed")


def fit_nodes(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], *, pool_key: str
) -> list[FitNode]:
    by_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        name = (pod.get("spec") or {}).get("nodeName")
        if name:
            by_node[name].append(pod)
    requests: dict[str, Resources] = {}
    return [
        fit_node(node, by_node.get(node["metadata"]["name"], []), pool_key=pool_key, cache=requests)
        for node in nodes
    ]


def fit_node(
    node: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    *,
    pool_key: str,
    cache: dict[str, Resources] | None = None,
) -> FitNode:
    meta, spec, status = (
        node.get("metadata") or {},
        node.get("spec") or {},
        node.get("status") or {},
    )
    labels = dict(meta.get("labels") or {})
    allocatable = dict(status.get("allocatable") or {})
    max_pods = amount_or_zero("pods", allocatable.pop("pods", "0"))
    on_node = [p for p in (node_pod(pod, cache) for pod in pods) if p is not None]
    return FitNode(
        name=meta["name"],
        pool=labels.get(pool_key, NO_POOL),
        labels=labels,
        taints=tuple(
            Taint(t.get("key") or "", t.get("value") or "", t.get("effect") or "")
            for t in spec.get("taints") or []
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=_ready(status),
        allocatable=Resources.of({k: amount_or_zero(k, v) for k, v in allocatable.items()}),
        max_pods=max_pods,
        pods=tuple(on_node),
    )


def node_pod(pod: Mapping[str, Any], cache: dict[str, Resources] | None = None) -> NodePod | None:
    """A bound pod's footprint, or None when it has finished and holds nothing. Pods of one
    controller look alike, so `cache` keeps requests by what they are computed from."""
    if (pod.get("status") or {}).get("phase") in FINISHED:
        return None
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    key = repr(
        (
            [c.get("resources") for c in spec.get("containers") or []],
            [
                (c.get("resources"), c.get("restartPolicy"))
                for c in spec.get("initContainers") or []
            ],
            spec.get("overhead"),
        )
    )
    cached = cache.get(key) if cache is not None else None
    requests = cached or read_pod_resources(FieldReader(), spec, "spec").requests
    if cache is not None:
        cache[key] = requests
    priority = spec.get("priority")
    return NodePod(
        requests,
        priority if isinstance(priority, int) else 0,
        f"{meta.get('namespace', '')}/{meta.get('name', '')}",
    )


def _ready(status: Mapping[str, Any]) -> bool:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False
