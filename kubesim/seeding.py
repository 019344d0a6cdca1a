"""Putting a scenario into a cluster: nodes first, then the pods bound to them, then pending."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubesim.cluster import Cluster
from kubesim.daemonsets import DaemonSetController
from kubesim.scenario import Scenario, node_object, pod_object


def seed(cluster: Cluster, scenario: Scenario) -> None:
    created = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Before the nodes: the DaemonSet controller places its pods as each node appears.
    DaemonSetController.install(cluster)
    for group in scenario.groups:
        for index in range(group.count):
            node = node_object(group, index, created)
            cluster.store.create("nodes", node)
            node_name = node["metadata"]["name"]
            for spec in group.pods:
                for copy_index in range(spec.count):
                    if not group.ready:
                        continue
                    name = f"{spec.name}-{node_name}"
                    if spec.count > 1:
                        name += f"-{copy_index}"
                    cluster.create_pod(pod_object(spec, name, node_name))
    for spec in scenario.pending:
        for index in range(spec.count):
            name = f"{spec.name}-{index}" if spec.count > 1 else spec.name
            cluster.create_pod(pod_object(spec, name, None))
