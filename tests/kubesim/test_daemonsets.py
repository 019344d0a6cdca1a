"""DaemonSets (apps/v1): the GPU operator's device plugin and dcgm-exporter on every GPU node,
their pods owned, pinned and tolerating as the DaemonSet controller makes them, with the
official client and with `kubectl get ds` and `kubectl drain --ignore-daemonsets`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.kubesim.test_kubectl import KUBECTL, kubectl
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import wait_for

OPERANDS = {"nvidia-device-plugin-daemonset", "nvidia-dcgm-exporter"}
NODES = 25
CONTROLLER_TOLERATIONS = {
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
}
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="no kubectl on this machine")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim-ds"), tls=True) as server:
        yield server


def apps(cluster: Kubesim) -> client.AppsV1Api:
    return client.AppsV1Api(cluster.api_client())


def daemon_pods(cluster: Kubesim, node: str) -> list[client.V1Pod]:
    pods = cluster.core().list_namespaced_pod(
        "gpu-operator", field_selector=f"spec.nodeName={node}"
    )
    return sorted(pods.items, key=lambda p: p.metadata.name)


def test_the_gpu_operators_daemonsets_and_their_counts(cluster: Kubesim) -> None:
    found = apps(cluster).list_daemon_set_for_all_namespaces().items
    assert {d.metadata.name for d in found} == OPERANDS
    for ds in found:
        assert ds.metadata.namespace == "gpu-operator"
        assert ds.spec.selector.match_labels == {"app": ds.metadata.name}
        assert ds.spec.template.spec.node_selector == {"nvidia.com/gpu.present": "true"}
        status = ds.status
        # The node that is not ready keeps its daemon pods, not ready.
        assert (status.desired_number_scheduled, status.current_number_scheduled) == (25, 25)
        assert (status.number_ready, status.number_available) == (24, 24)
        assert status.number_unavailable == 1 and status.number_misscheduled == 0
    with pytest.raises(ApiException) as refused:
        apps(cluster).read_namespaced_daemon_set("no-such-ds", "gpu-operator")
    assert refused.value.status == 404
    body = json.loads(refused.value.body)
    assert body["message"] == 'daemonsets.apps "no-such-ds" not found'
    assert body["details"] == {"name": "no-such-ds", "group": "apps", "kind": "daemonsets"}


def test_daemon_pods_are_owned_pinned_and_tolerate_node_problems(cluster: Kubesim) -> None:
    exporter = apps(cluster).read_namespaced_daemon_set("nvidia-dcgm-exporter", "gpu-operator")
    pods = cluster.core().list_namespaced_pod(
        "gpu-operator", label_selector="app=nvidia-dcgm-exporter"
    )
    nodes = {n.metadata.name for n in cluster.core().list_node().items}
    assert sorted(p.spec.node_name for p in pods.items) == sorted(nodes)
    pod = next(p for p in pods.items if p.spec.node_name == "a100-infer-000")
    (owner,) = pod.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.name) == (
        "apps/v1",
        "DaemonSet",
        exporter.metadata.name,
    )
    assert owner.uid == exporter.metadata.uid
    assert owner.controller is True and owner.block_owner_deletion is True
    assert pod.metadata.generate_name == "nvidia-dcgm-exporter-"
    assert pod.metadata.labels["pod-template-generation"] == "1"
    assert "controller-revision-hash" in pod.metadata.labels
    tolerations = {(t.key, t.effect) for t in pod.spec.tolerations}
    assert tolerations >= CONTROLLER_TOLERATIONS
    (term,) = (
        pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    )
    assert [(f.key, f.operator, f.values) for f in term.match_fields] == [
        ("metadata.name", "In", ["a100-infer-000"])
    ]
    down = next(p for p in pods.items if p.spec.node_name == "a100-reserve-down-000")
    ready = next(c for c in down.status.conditions if c.type == "Ready")
    assert ready.status == "False"


def test_daemonsets_are_watched(cluster: Kubesim) -> None:
    events = list(
        watch.Watch().stream(
            apps(cluster).list_namespaced_daemon_set, "gpu-operator", timeout_seconds=1
        )
    )
    assert {(e["type"], e["object"].metadata.name) for e in events} == {
        ("ADDED", name) for name in OPERANDS
    }


def test_daemonsets_are_read_only(cluster: Kubesim) -> None:
    with pytest.raises(ApiException) as refused:
        apps(cluster).delete_namespaced_daemon_set("nvidia-dcgm-exporter", "gpu-operator")
    assert refused.value.status == 405


@needs_kubectl
def test_kubectl_get_ds(cluster: Kubesim) -> None:
    lines = kubectl(cluster, "get", "ds", "-A").stdout.splitlines()
    assert lines[0].split() == [
        "NAMESPACE",
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "NODE",
        "SELECTOR",
        "AGE",
    ]
    rows = {line.split()[1]: line.split() for line in lines[1:]}
    assert set(rows) == OPERANDS
    assert rows["nvidia-dcgm-exporter"][2:8] == [
        "25",
        "25",
        "24",
        "25",
        "24",
        "nvidia.com/gpu.present=true",
    ]
    wide = kubectl(cluster, "get", "daemonsets.apps", "-n", "gpu-operator", "-o", "wide").stdout
    assert "CONTAINERS" in wide and "nvcr.io/nvidia/k8s/dcgm-exporter:" in wide
    assert "app=nvidia-dcgm-exporter" in wide


@needs_kubectl
def test_kubectl_drain_leaves_daemon_pods_as_on_a_real_gpu_node(cluster: Kubesim) -> None:
    node = "a100-reserve-006"
    daemons = [p.metadata.name for p in daemon_pods(cluster, node)]
    result = kubectl(
        cluster,
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=60s",
        "--grace-period=1",  # the notebook's 30 s are not what is tested here
    )
    assert (
        "Warning: ignoring DaemonSet-managed Pods: "
        + ", ".join(f"gpu-operator/{name}" for name in daemons)
        in result.stderr
    )
    assert f"evicting pod research/notebook-{node}" in result.stdout + result.stderr
    assert f"node/{node} drained" in result.stdout
    left = cluster.core().list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
    assert sorted(p.metadata.name for p in left.items) == daemons
    assert cluster.core().read_node(node).spec.unschedulable is True
    kubectl(cluster, "uncordon", node)


@needs_kubectl
def test_kubectl_drain_without_ignore_daemonsets_refuses(cluster: Kubesim) -> None:
    node = "a100-reserve-007"
    result = kubectl(cluster, "drain", node, "--timeout=30s", check=False)
    assert result.returncode != 0
    assert "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)" in (
        result.stderr
    )
    assert f"notebook-{node}" in {
        p.metadata.name for p in cluster.core().list_namespaced_pod("research").items
    }
    kubectl(cluster, "uncordon", node)


def test_a_deleted_daemon_pod_is_replaced(cluster: Kubesim) -> None:
    node = "a100-reserve-008"
    before = {p.metadata.name for p in daemon_pods(cluster, node)}
    gone = next(n for n in before if n.startswith("nvidia-dcgm-exporter-"))
    cluster.core().delete_namespaced_pod(gone, "gpu-operator")
    # As the DaemonSet controller does, the replacement comes once the old pod is gone: while
    # it terminates (its grace period) the node still counts as running one.
    assert gone in {p.metadata.name for p in daemon_pods(cluster, node)}
    cluster.control("clock", {"advance": 31})
    wait_for(
        lambda: (
            len(daemon_pods(cluster, node)) == 2
            and gone not in {p.metadata.name for p in daemon_pods(cluster, node)}
        ),
        timeout=10,
        what="the replacement pod",
    )
    exporter = apps(cluster).read_namespaced_daemon_set("nvidia-dcgm-exporter", "gpu-operator")
    assert exporter.status.current_number_scheduled == NODES


def test_a_new_gpu_node_gets_its_daemon_pods(cluster: Kubesim) -> None:
    template = cluster.core().read_node("gpu-new-001")
    cluster.core().create_node(
        {
            "metadata": {"name": "gpu-new-099", "labels": template.metadata.labels},
            "status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}},
        }
    )
    pods = daemon_pods(cluster, "gpu-new-099")
    assert sorted(p.metadata.generate_name for p in pods) == [
        "nvidia-dcgm-exporter-",
        "nvidia-device-plugin-daemonset-",
    ]
    exporter = apps(cluster).read_namespaced_daemon_set("nvidia-dcgm-exporter", "gpu-operator")
    assert exporter.status.desired_number_scheduled == NODES + 1
