"""Put the cluster back as the scenario made it, between two tests sharing one control
plane: the scenario's nodes with their labels, taints and schedulability (the controllers'
own `node.kubernetes.io/` taints kept), the scenario's pods (missing ones created again,
others deleted), no namespace, budget or workload a test created, and the kubelets' own
switches (lost nodes, GPU overrides, silenced exporters) off."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.daemonsets import NAMESPACE as OPERATOR_NAMESPACE
from kubesim.kubelet import owners
from kubesim.kubelet.agent import Kubelet

SYSTEM_NAMESPACES = {"kube-system", "kube-public", "kube-node-lease", OPERATOR_NAMESPACE}
CONTROLLER_TAINTS = "node.kubernetes.io/"


def reset(kubelet: Kubelet, timeout: float = 60) -> dict[str, int]:
    core = client.CoreV1Api(kubelet.api)
    kubelet.mirror.gpu_overrides.clear()
    kubelet.mirror.exporter_disabled.clear()
    for name in sorted(kubelet.lost - kubelet.never_ready):
        kubelet.recover(name)
    restored = sum(_restore_node(core, kubelet, name) for name in kubelet.nodes)
    strangers = [
        n.metadata.name for n in core.list_node().items if n.metadata.name not in kubelet.nodes
    ]
    for name in strangers:
        _gone(core.delete_node, name)
    wanted = kubelet.scenario_pods()
    deleted = 0
    for namespace in {n.metadata.name for n in core.list_namespace().items} - SYSTEM_NAMESPACES:
        deleted += _clear_namespace(kubelet, namespace, wanted)
    _wait_pods_gone(core, wanted, timeout)
    _wait_namespaces_gone(core, kubelet.namespaces, timeout)
    created = kubelet.create_missing_pods()
    kubelet.ensure_owners(timeout)
    _wait_nodes_settled(core, kubelet, timeout)
    return {
        "nodes_restored": restored,
        "nodes_removed": len(strangers),
        "pods_deleted": deleted,
        "pods_created": created,
    }


def _clear_namespace(
    kubelet: Kubelet, namespace: str, wanted: dict[tuple[str, str], dict[str, Any]]
) -> int:
    """What a test left in `namespace`: its budgets and workloads, and, when any of the
    scenario's pods there was touched (evicted, replaced, ended), every workload and pod of
    the namespace, made again afterwards. The namespace too, when the scenario did not make
    it. The number of pods deleted."""
    api = kubelet.api
    core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
    policy = client.PolicyV1Api(api)
    pods = core.list_namespaced_pod(namespace).items
    here = {key for key in wanted if key[0] == namespace}
    intact = {(namespace, p.metadata.name) for p in pods if _untouched(p, wanted)}
    dirty = intact != here or len(pods) != len(intact)
    scenario_owners = {(k[1], k[2]) for k in owners.owners_of(wanted) if k[0] == namespace}
    for budget in policy.list_namespaced_pod_disruption_budget(namespace).items:
        _gone(policy.delete_namespaced_pod_disruption_budget, budget.metadata.name, namespace)
    for kind, lister, deleter in (
        ("Deployment", apps.list_namespaced_deployment, apps.delete_namespaced_deployment),
        ("ReplicaSet", apps.list_namespaced_replica_set, apps.delete_namespaced_replica_set),
        ("Job", batch.list_namespaced_job, batch.delete_namespaced_job),
    ):
        for found in lister(namespace).items:
            if dirty or (kind, found.metadata.name) not in scenario_owners:
                _gone(deleter, found.metadata.name, namespace, propagation_policy="Background")
    if not dirty:
        return 0
    for pod in pods:
        _force_delete(core, pod)
    if namespace not in kubelet.namespaces:
        _gone(core.delete_namespace, namespace)
    return len(pods)


def _untouched(pod: Any, wanted: dict[tuple[str, str], dict[str, Any]]) -> bool:
    spec = wanted.get((pod.metadata.namespace, pod.metadata.name))
    return spec is not None and (
        not pod.metadata.deletion_timestamp
        and pod.spec.node_name == spec["spec"].get("nodeName", pod.spec.node_name)
        and (pod.status.phase or "Pending") not in ("Succeeded", "Failed")
    )


def _restore_node(core: client.CoreV1Api, kubelet: Kubelet, name: str) -> int:
    scenario = kubelet.nodes[name]
    kubelet.register_node(name)  # back if a test deleted it; its true status either way
    current = core.read_node(name)
    labels = dict(scenario["metadata"]["labels"])
    extra = {k: None for k in (current.metadata.labels or {}) if k not in labels}
    kept = [
        {"key": t.key, "value": t.value, "effect": t.effect}
        | ({"timeAdded": t.time_added.strftime("%Y-%m-%dT%H:%M:%SZ")} if t.time_added else {})
        for t in current.spec.taints or []
        if t.key.startswith(CONTROLLER_TAINTS)
    ]
    taints = list(scenario["spec"].get("taints") or []) + kept
    for taint in kept:
        if taint["key"] == "node.kubernetes.io/unschedulable":
            taints.remove(taint)  # follows spec.unschedulable
    unschedulable = bool(scenario["spec"].get("unschedulable"))
    same = (
        (current.metadata.labels or {}) == labels
        and [(t.key, t.effect) for t in current.spec.taints or []]
        == [(t["key"], t["effect"]) for t in taints]
        and bool(current.spec.unschedulable) == unschedulable
    )
    if same:
        return 0
    body = {
        "metadata": {"labels": {**labels, **extra}},
        "spec": {"taints": taints or None, "unschedulable": unschedulable or None},
    }
    core.patch_node(name, body)
    return 1


def _force_delete(core: client.CoreV1Api, pod: Any) -> None:
    meta = pod.metadata
    if meta.finalizers:
        _gone(
            lambda: core.patch_namespaced_pod(
                meta.name, meta.namespace, {"metadata": {"finalizers": None}}
            )
        )
    _gone(lambda: core.delete_namespaced_pod(meta.name, meta.namespace, grace_period_seconds=0))


def _wait_pods_gone(
    core: client.CoreV1Api, wanted: dict[tuple[str, str], Any], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [
            p
            for p in core.list_pod_for_all_namespaces().items
            if p.metadata.namespace not in SYSTEM_NAMESPACES
            and (
                p.metadata.deletion_timestamp
                or (p.metadata.namespace, p.metadata.name) not in wanted
            )
        ]
        if not left:
            return
        time.sleep(0.2)
    raise TimeoutError(f"pods still there after reset: {[p.metadata.name for p in left][:10]}")


def _wait_nodes_settled(core: client.CoreV1Api, kubelet: Kubelet, timeout: float) -> None:
    """Every reporting node Ready and rid of the lifecycle controller's not-ready and
    unreachable taints (taken off a moment after Ready), so a test starts from what a
    settled cluster lists."""
    passing = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        unsettled = [
            n.metadata.name
            for n in core.list_node().items
            if n.metadata.name not in kubelet.lost
            and (
                not any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
                or any(t.key in passing for t in n.spec.taints or [])
            )
        ]
        if not unsettled:
            return
        time.sleep(0.2)
    raise TimeoutError(f"nodes not settled after reset: {unsettled[:10]}")


def _wait_namespaces_gone(core: client.CoreV1Api, kept: set[str], timeout: float) -> None:
    """A test's namespace is gone before the next test may create it again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {n.metadata.name for n in core.list_namespace().items} - kept - SYSTEM_NAMESPACES
        if not left:
            return
        time.sleep(0.2)
    raise TimeoutError(f"namespaces still there after reset: {sorted(left)}")


def _gone(call: Any, *args: Any, **kwargs: Any) -> None:
    """A delete (or a finalizer's removal) that someone else may have done first."""
    try:
        call(*args, **kwargs)
    except ApiException as error:
        if error.status not in (404, 409):
            raise
