"""Putting a scenario into a cluster: nodes first, then the pods bound to them, then pending.

Seeded nodes carry the managedFields a real node would: the kubelet owns its own labels,
GPU feature discovery (through nfd-master) the nvidia.com labels, the controller manager
the pod CIDRs, and an operator's `kubectl label`/`kubectl taint` the pool labels and taints.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from kubesim import apply, dra
from kubesim.cluster import Cluster
from kubesim.daemonsets import DaemonSetController
from kubesim.scenario import NodeGroup, PodSpec, Scenario, node_object, pod_object


def seed(cluster: Cluster, scenario: Scenario) -> None:
    created = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Before the nodes: the DaemonSet controller places its pods as each node appears.
    cluster.daemonsets = DaemonSetController.install(cluster)
    for group in scenario.groups:
        managed: list[dict[str, Any]] | None = None
        for index in range(group.count):
            node = node_object(group, index, created)
            if managed is None:
                managed = seeded_managed_fields(node, group, created)
            # One list for the whole group: stored objects are never mutated.
            node["metadata"]["managedFields"] = managed
            cluster.store.create("nodes", node)
            node_name = node["metadata"]["name"]
            for spec in group.pods:
                for copy_index in range(spec.count):
                    if not group.ready:
                        continue
                    name = f"{spec.name}-{node_name}"
                    if spec.count > 1:
                        name += f"-{copy_index}"
                    cluster.create_pod(pod_object(placed_pod(spec, group), name, node_name))
    dra_nodes = [
        (group, node_object(group, index, created)["metadata"]["name"])
        for group in scenario.groups
        if group.dra
        for index in range(group.count)
    ]
    if dra_nodes:  # NVIDIA's DRA driver is installed: its classes, and a slice a node
        for device_class in dra.device_classes():
            cluster.store.create("deviceclasses", device_class)
        for group, node_name in dra_nodes:
            cluster.store.create("resourceslices", group.resource_slice(node_name))
    for spec in scenario.pending:
        for index in range(spec.count):
            name = f"{spec.name}-{index}" if spec.count > 1 else spec.name
            cluster.create_pod(pod_object(spec, name, None))
    # The controllers have had thirty days to react to the scenario's nodes.
    cluster.settle()
    cluster.lifecycle.catch_up()


def placed_pod(spec: PodSpec, group: NodeGroup) -> PodSpec:
    """A pod seeded onto a node tolerates the node's taints, as the scheduler would have
    required, unless the scenario gives its tolerations. Pods on a node that lacks its pool's
    taint (the demo's drifted node) tolerate nothing, so they show as intruders."""
    if spec.tolerations or not group.taints:
        return spec
    tolerations = [
        {"key": t["key"], "operator": "Equal", "value": t.get("value", ""), "effect": t["effect"]}
        for t in group.taints
    ]
    return dataclasses.replace(spec, tolerations=tolerations)


def seeded_managed_fields(
    node: dict[str, Any], group: NodeGroup, created: str
) -> list[dict[str, Any]]:
    labels = node["metadata"]["labels"]
    steps = [
        ("kubelet", lambda k: not k.startswith("nvidia.com/") and k not in group.labels),
        ("nfd-master", lambda k: k.startswith("nvidia.com/") and k not in group.labels),
        ("kubectl-label", lambda k: k in group.labels),
    ]
    state: dict[str, Any] = {"metadata": {"name": node["metadata"]["name"]}, "spec": {}}
    for manager, owns in steps:
        after = copy.deepcopy(state)
        after["metadata"].setdefault("labels", {}).update(
            {k: v for k, v in labels.items() if owns(k)}
        )
        if manager == "kubelet":
            after["metadata"]["annotations"] = dict(node["metadata"].get("annotations") or {})
        state = apply.record_update(state, after, manager, created)
    spec = node.get("spec") or {}
    after = copy.deepcopy(state)
    after["spec"].update({k: spec[k] for k in ("podCIDR", "podCIDRs") if k in spec})
    state = apply.record_update(state, after, "kube-controller-manager", created)
    if spec.get("taints"):
        after = copy.deepcopy(state)
        after["spec"]["taints"] = spec["taints"]
        state = apply.record_update(state, after, "kubectl-taint", created)
    return list(state["metadata"].get("managedFields") or [])
