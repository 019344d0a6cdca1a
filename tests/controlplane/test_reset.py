"""Putting the real cluster back to the demo scenario between tests (`kubesim.kubelet.reset`):
everything a test changed is undone, and a reset after a test that changed nothing writes
nothing (each write wakes the controllers, and the next test would start amid their work)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from tests.real_cluster import RealCluster
from tests.servers import wait_for

pytestmark = pytest.mark.kubernetes
NODE = "a100-reserve-001"
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def kubelet_requests(real: RealCluster, since: int) -> list[dict[str, Any]]:
    """The kubelet's requests in the audit log after byte `since`, its heartbeats (Leases
    and node status) left out."""
    user = real.plane.tokens["kubelet"].user
    real.audit_events()  # waits until the log stands still
    with real.audit_log.open("rb") as log:
        log.seek(since)
        events = [json.loads(line) for line in log.read().splitlines() if line]
    return [
        e
        for e in events
        if e["user"]["username"] == user
        and e.get("objectRef", {}).get("resource") != "leases"
        and e.get("objectRef", {}).get("subresource") != "status"
    ]


def test_a_reset_after_a_test_that_changed_nothing_only_reads(real: RealCluster) -> None:
    real.audit_events()  # the fixture's own reset logged in full before counting from here
    since = real.audit_log.stat().st_size
    answer = real.reset()
    assert answer == {"nodes_restored": 0, "nodes_removed": 0, "pods_deleted": 0, "pods_created": 0}
    requests = kubelet_requests(real, since)
    # Refused writes change nothing: the kubelet finishing, late, the graceful deletion of
    # a pod an earlier reset already deleted and made again sends a DELETE whose uid
    # precondition fails (409), and it sends it as the same user as the reset.
    writes = [
        (e["verb"], e["objectRef"])
        for e in requests
        if e["verb"] in WRITES and e["responseStatus"]["code"] < 400
    ]
    assert writes == []
    # One list of each kind (nodes, namespaces, pods, budgets, five workload kinds) and the
    # lists of the waits that find nothing left: a dozen or so, whatever the node count.
    reads = [
        (e["verb"], e["objectRef"].get("resource")) for e in requests if e["verb"] not in WRITES
    ]
    assert len(reads) <= 16, reads


def test_a_reset_undoes_what_a_test_changed(real: RealCluster) -> None:
    core, apps = real.core(), client.AppsV1Api(real.api_client())
    policy = client.PolicyV1Api(real.api_client())
    before = core.read_node(NODE)
    # The node lifecycle controller's copies of kubernetes.io/os and arch stay on the node.
    assert before.metadata.labels["beta.kubernetes.io/os"] == "linux"
    core.patch_node(
        NODE,
        {
            "metadata": {"labels": {"gpu-pool": "training", "team": "x"}},
            "spec": {
                "unschedulable": True,
                "taints": [{"key": "workload-training", "value": "true", "effect": "NoSchedule"}],
            },
        },
    )
    pod = next(
        p
        for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}").items
        if p.metadata.namespace not in ("gpu-operator", "kube-system")
    )
    core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
    core.create_namespace({"metadata": {"name": "left-behind"}})
    template = {
        "metadata": {"labels": {"app": "left"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    selector = {"matchLabels": {"app": "left"}}
    apps.create_namespaced_daemon_set(
        "left-behind",
        {"metadata": {"name": "left"}, "spec": {"selector": selector, "template": template}},
    )
    policy.create_namespaced_pod_disruption_budget(
        "left-behind",
        {"metadata": {"name": "left"}, "spec": {"selector": selector, "maxUnavailable": 0}},
    )
    wait_for(lambda: core.list_namespaced_pod("left-behind").items, timeout=60, what="daemon pods")
    # A node a test added, and a daemon pod bound to it: both go.
    core.create_node({"metadata": {"name": "stranger-000"}})
    core.create_namespaced_pod(
        "gpu-operator",
        {
            "metadata": {"name": "stranded"},
            "spec": {"nodeName": "stranger-000", "containers": [{"name": "c", "image": "x"}]},
        },
    )
    # A namespace holding no pod at all (a chart's service accounts) is a leftover too.
    core.create_namespace({"metadata": {"name": "accounts-only"}})
    core.create_namespaced_service_account("accounts-only", {"metadata": {"name": "portal"}})
    # A pod the scenario leaves Pending, bound meanwhile (as the real scheduler does once a
    # test makes room for it), waits unbound again after the reset.
    core.create_namespaced_pod_binding(
        "eval-job-2",
        "ml-training",
        {"metadata": {"name": "eval-job-2"}, "target": {"kind": "Node", "name": NODE}},
        _preload_content=False,
    )
    assert core.read_namespaced_pod("eval-job-2", "ml-training").spec.node_name == NODE

    answer = real.reset()

    assert answer["nodes_restored"] == 1
    assert answer["pods_deleted"] >= 1 and answer["pods_created"] >= 1
    after = core.read_node(NODE)
    assert after.metadata.labels == before.metadata.labels
    assert [(t.key, t.effect) for t in after.spec.taints or []] == [
        (t.key, t.effect) for t in before.spec.taints or []
    ]
    assert not after.spec.unschedulable
    names = {n.metadata.name for n in core.list_namespace().items}
    assert "left-behind" not in names and "accounts-only" not in names
    assert "stranger-000" not in {n.metadata.name for n in core.list_node().items}
    assert not core.list_pod_for_all_namespaces(field_selector="spec.nodeName=stranger-000").items
    assert core.read_namespaced_pod("eval-job-2", "ml-training").spec.node_name is None
    assert not core.list_pod_for_all_namespaces(label_selector="app=left").items
    back = core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
    assert back.metadata.uid != pod.metadata.uid
    assert back.spec.node_name == NODE
    # And a reset now finds nothing more to do.
    assert real.reset() == {
        "nodes_restored": 0,
        "nodes_removed": 0,
        "pods_deleted": 0,
        "pods_created": 0,
    }
