"""Put the cluster back as the scenario made it, between two tests sharing one control
plane: the scenario's nodes with their labels, taints and schedulability (the controllers'
own `node.kubernetes.io/` taints kept), the scenario's pods (missing ones created again,
others deleted), no namespace, budget or workload a test created, and the kubelets' own
switches (lost nodes, GPU overrides, silenced exporters) off."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.daemonsets import NAMESPACE as OPERATOR_NAMESPACE
from kubesim.kubelet import owners
from kubesim.kubelet.agent import Kubelet

SYSTEM_NAMESPACES = {"kube-system", "kube-public", "kube-node-lease", OPERATOR_NAMESPACE}
CONTROLLER_TAINTS = "node.kubernetes.io/"


# The node lifecycle controller copies these from their `kubernetes.io/` labels onto every
# node (deprecated, still reconciled): a reset that took them off would be undone at once.
RECONCILED_LABELS = {
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
}


def reset(kubelet: Kubelet, timeout: float = 60) -> dict[str, int]:
    """Each step reads with one list and writes only what differs, so a reset after a test
    that changed nothing is a dozen requests, not one round of writes per node."""
    core = client.CoreV1Api(kubelet.api)
    kubelet.mirror.gpu_overrides.clear()
    kubelet.mirror.exporter_disabled.clear()
    for name in sorted(kubelet.lost - kubelet.never_ready):
        kubelet.recover(name)
    current = {n.metadata.name: n for n in core.list_node().items}
    restored = sum(_restore_node(core, kubelet, name, current.get(name)) for name in kubelet.nodes)
    strangers = sorted(set(current) - set(kubelet.nodes))
    for name in strangers:
        _gone(core.delete_node, name)
    wanted = kubelet.scenario_pods()
    found = Found.listed(kubelet.api)
    # Pods bound to a node a test added: the pod garbage collector would delete them only
    # a while after their node went (the DaemonSets' too, in the operator's namespace).
    stranded = [
        p
        for pods in found.pods.values()
        for p in pods
        if p.spec.node_name and p.spec.node_name not in kubelet.nodes
    ]
    for pod in stranded:
        _force_delete(core, pod)
    deleted = sum(p.metadata.namespace in SYSTEM_NAMESPACES for p in stranded)
    for namespace in {n.metadata.name for n in core.list_namespace().items} - SYSTEM_NAMESPACES:
        deleted += _clear_namespace(kubelet, namespace, wanted, found)
    _wait_pods_gone(core, wanted, timeout, stranded={p.metadata.uid for p in stranded})
    _wait_namespaces_gone(core, kubelet.namespaces, timeout)
    created = kubelet.create_missing_pods()
    if created:
        _pending_as_seeded(core, kubelet, wanted, timeout)
    kubelet.ensure_owners(timeout, existing=found.kept_owners)
    _wait_nodes_settled(core, kubelet, timeout)
    return {
        "nodes_restored": restored,
        "nodes_removed": len(strangers),
        "pods_deleted": deleted,
        "pods_created": created,
    }


@dataclass
class Found:
    """What the cluster holds outside the system namespaces, by namespace, from one list of
    each kind; `kept_owners` gathers the scenario's owners a reset leaves in place."""

    pods: dict[str, list[Any]]
    budgets: dict[str, list[Any]]
    workloads: dict[str, list[tuple[str, Any, Callable[..., Any]]]]
    kept_owners: set[owners.OwnerKey] = field(default_factory=set)

    @classmethod
    def listed(cls, api: client.ApiClient) -> Found:
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        batch, policy = client.BatchV1Api(api), client.PolicyV1Api(api)
        workloads: dict[str, list[tuple[str, Any, Callable[..., Any]]]] = defaultdict(list)
        for kind, lister, deleter in (
            (
                "Deployment",
                apps.list_deployment_for_all_namespaces,
                apps.delete_namespaced_deployment,
            ),
            (
                "ReplicaSet",
                apps.list_replica_set_for_all_namespaces,
                apps.delete_namespaced_replica_set,
            ),
            (
                "DaemonSet",
                apps.list_daemon_set_for_all_namespaces,
                apps.delete_namespaced_daemon_set,
            ),
            (
                "StatefulSet",
                apps.list_stateful_set_for_all_namespaces,
                apps.delete_namespaced_stateful_set,
            ),
            ("Job", batch.list_job_for_all_namespaces, batch.delete_namespaced_job),
        ):
            for item in lister().items:
                workloads[item.metadata.namespace].append((kind, item, deleter))
        return cls(
            pods=_by_namespace(core.list_pod_for_all_namespaces().items),
            budgets=_by_namespace(policy.list_pod_disruption_budget_for_all_namespaces().items),
            workloads=workloads,
        )


def _by_namespace(items: list[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = defaultdict(list)
    for item in items:
        grouped[item.metadata.namespace].append(item)
    return grouped


def _clear_namespace(
    kubelet: Kubelet, namespace: str, wanted: dict[tuple[str, str], dict[str, Any]], found: Found
) -> int:
    """What a test left in `namespace`: its budgets and workloads, and, when any of the
    scenario's pods there was touched (evicted, replaced, ended), every workload and pod of
    the namespace, made again afterwards. The namespace too, when the scenario did not make
    it. The number of pods deleted."""
    core, policy = client.CoreV1Api(kubelet.api), client.PolicyV1Api(kubelet.api)
    pods = found.pods.get(namespace, [])
    here = {key for key in wanted if key[0] == namespace}
    intact = {(namespace, p.metadata.name) for p in pods if _untouched(p, kubelet, wanted)}
    dirty = intact != here or len(pods) != len(intact)
    scenario_owners = {(k[1], k[2]) for k in owners.owners_of(wanted) if k[0] == namespace}
    for budget in found.budgets.get(namespace, []):
        _gone(policy.delete_namespaced_pod_disruption_budget, budget.metadata.name, namespace)
    for kind, item, deleter in found.workloads.get(namespace, []):
        if dirty or (kind, item.metadata.name) not in scenario_owners:
            _gone(deleter, item.metadata.name, namespace, propagation_policy="Background")
        else:
            found.kept_owners.add((namespace, kind, item.metadata.name))
    if namespace not in kubelet.namespaces:
        # Deleted even when it holds no pod: a namespace of service accounts and roles
        # alone (a chart's) is as much a leftover.
        _gone(core.delete_namespace, namespace)
    if not dirty:
        return 0
    for pod in pods:
        _force_delete(core, pod)
    return len(pods)


def _untouched(pod: Any, kubelet: Kubelet, wanted: dict[tuple[str, str], dict[str, Any]]) -> bool:
    """A scenario pod as the scenario made it: on its node; or, for one the scenario leaves
    to the scheduler, bound or waiting as the scheduler decided after the seeding (a
    waiting pod the scheduler binds once a test makes room is undone)."""
    key = (pod.metadata.namespace, pod.metadata.name)
    spec = wanted.get(key)
    if spec is None or pod.metadata.deletion_timestamp:
        return False
    if (pod.status.phase or "Pending") in ("Succeeded", "Failed"):
        return False
    if spec["spec"].get("nodeName"):
        return bool(pod.spec.node_name == spec["spec"]["nodeName"])
    return bool(pod.spec.node_name) == (key in kubelet.pending_bound)


def _pending_as_seeded(
    core: client.CoreV1Api,
    kubelet: Kubelet,
    wanted: dict[tuple[str, str], dict[str, Any]],
    timeout: float,
    rounds: int = 3,
) -> None:
    """The scenario's pending pods bound or waiting as the scheduler decided after the
    seeding. A pod made again may be decided otherwise (the scheduler's cache had not yet
    seen a bound pod made just before it): made once more, before any owner exists to
    replace it, at most `rounds` times."""
    for remade in range(rounds + 1):
        differ = sorted(kubelet.pending_decided(timeout) ^ kubelet.pending_bound)
        if not differ or remade == rounds:
            break
        for namespace, name in differ:
            _force_delete(core, core.read_namespaced_pod(name, namespace))
        _wait_pods_gone(core, {k: v for k, v in wanted.items() if k not in differ}, timeout)
        kubelet.create_missing_pods()
    if not differ:
        return
    raise RuntimeError(
        f"the scheduler placed these pending pods otherwise after the seeding: {differ}"
    )


def _restore_node(core: client.CoreV1Api, kubelet: Kubelet, name: str, current: Any) -> int:
    """The node as the scenario made it: created again (with its status and Lease) if a
    test deleted it, its status posted again if a test rewrote its capacity, and its labels,
    taints and schedulability put back. 1 if anything was written."""
    scenario = kubelet.nodes[name]
    if current is None:
        kubelet.register_node(name)
        current = core.read_node(name)
        written = 1
    else:
        written = 0
        if _resources(current) != _resources(scenario):
            kubelet.post_status(name)
            written = 1
    labels = dict(scenario["metadata"]["labels"])
    labels |= {
        copy: labels[source]
        for copy, source in RECONCILED_LABELS.items()
        if source in labels and copy in (current.metadata.labels or {})
    }
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
        and [(t.key, t.value, t.effect) for t in current.spec.taints or []]
        == [(t["key"], t.get("value"), t["effect"]) for t in taints]
        and bool(current.spec.unschedulable) == unschedulable
    )
    if same:
        return written
    body = {
        "metadata": {"labels": {**labels, **extra}},
        "spec": {"taints": taints or None, "unschedulable": unschedulable or None},
    }
    core.patch_node(name, body)
    return 1


def _resources(node: Any) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) of a node as read, or as the scenario registers it."""
    if isinstance(node, dict):
        status = node["status"]
        return dict(status.get("capacity") or {}), dict(status.get("allocatable") or {})
    return dict(node.status.capacity or {}), dict(node.status.allocatable or {})


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
    core: client.CoreV1Api,
    wanted: dict[tuple[str, str], Any],
    timeout: float,
    stranded: Collection[str] = (),
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [
            p
            for p in core.list_pod_for_all_namespaces().items
            if p.metadata.uid in stranded
            or (
                p.metadata.namespace not in SYSTEM_NAMESPACES
                and (
                    p.metadata.deletion_timestamp
                    or (p.metadata.namespace, p.metadata.name) not in wanted
                )
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
