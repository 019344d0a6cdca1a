"""The real control plane with kubesim as kubelet: what kubesim's own API server was found to
do differently (K1-K14), proved on the real thing, and what the kubelet role must do for
the controllers to treat its nodes as real ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.real_cluster import RealCluster
from tests.servers import wait_for

pytestmark = pytest.mark.kubernetes
GPU = "nvidia.com/gpu"


def kubectl(
    real: RealCluster, *args: str, context: str = "admin"
) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed (Debian does not package it)")
    env = {**os.environ, "KUBECONFIG": str(real.kubeconfig)}
    return subprocess.run(
        [binary, "--context", context, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_servers_are_the_pinned_release(real: RealCluster) -> None:
    version = client.VersionApi(real.api_client()).get_code()
    assert version.git_version == "v1.37.2"
    assert (version.major, version.minor) == ("1", "37")
    for name, process in real.plane.processes.items():
        assert process.poll() is None, f"{name} is still running"


def test_nodes_register_heartbeat_and_lose_the_not_ready_taint(real: RealCluster) -> None:
    core = real.core()
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert len(nodes) == 25
    ready = [
        name
        for name, node in nodes.items()
        if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    ]
    assert len(ready) == 24  # the demo's one node that never reports
    leases = client.CoordinationV1Api(real.api_client()).list_namespaced_lease("kube-node-lease")
    assert {lease.metadata.name for lease in leases.items} >= set(ready)
    node = nodes["a100-reserve-000"]
    assert node.status.allocatable[GPU] == "8"
    assert not any(t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or [])


def test_the_node_that_never_reports_is_tainted_by_the_lifecycle_controller(
    real: RealCluster,
) -> None:
    down = [
        n
        for n in real.core().list_node().items
        if not any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)
    ]
    (node,) = down
    taints = {(t.key, t.effect) for t in node.spec.taints or []}
    assert ("node.kubernetes.io/unreachable", "NoSchedule") in taints or (
        "node.kubernetes.io/not-ready",
        "NoSchedule",
    ) in taints


def test_k5_a_node_created_through_the_api_gets_the_not_ready_taint(real: RealCluster) -> None:
    core = real.core()
    created = core.create_node({"metadata": {"name": "bare-node"}})
    try:
        taints = [(t.key, t.effect) for t in created.spec.taints]
        assert taints == [("node.kubernetes.io/not-ready", "NoSchedule")]
    finally:
        core.delete_node("bare-node")


def test_k7_pods_are_defaulted_by_the_api_server(real: RealCluster) -> None:
    core = real.core()
    pod = {
        "metadata": {"name": "defaults", "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {GPU: "1"}}}
            ],
            "tolerations": [{"operator": "Exists"}],
        },
    }
    created = core.create_namespaced_pod("default", pod)
    try:
        container = created.spec.containers[0]
        assert container.resources.requests == {GPU: "1"}
        assert container.image_pull_policy == "Always"  # no tag: latest
        assert container.termination_message_path == "/dev/termination-log"
        assert container.termination_message_policy == "File"
        assert created.spec.scheduler_name == "default-scheduler"
    finally:
        core.delete_namespaced_pod("defaults", "default", grace_period_seconds=0)


def test_k7_tolerations_for_not_ready_and_unreachable_are_added(real: RealCluster) -> None:
    core = real.core()
    pod = {
        "metadata": {"name": "tolerations", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]},
    }
    created = core.create_namespaced_pod("default", pod)
    try:
        added = {(t.key, t.effect, t.toleration_seconds) for t in created.spec.tolerations}
        assert added == {
            ("node.kubernetes.io/not-ready", "NoExecute", 300),
            ("node.kubernetes.io/unreachable", "NoExecute", 300),
        }
    finally:
        core.delete_namespaced_pod("tolerations", "default", grace_period_seconds=0)


def test_the_scheduler_leaves_the_too_big_pod_pending_in_its_own_words(
    real: RealCluster,
) -> None:
    core = real.core()

    def failed_scheduling() -> list[client.CoreV1Event]:
        events = core.list_event_for_all_namespaces(
            field_selector="involvedObject.name=big-train,reason=FailedScheduling"
        ).items
        return events

    wait_for(lambda: bool(failed_scheduling()), timeout=60, what="FailedScheduling")
    (pod,) = [p for p in core.list_pod_for_all_namespaces().items if p.metadata.name == "big-train"]
    assert pod.status.phase == "Pending" and not pod.spec.node_name
    message = failed_scheduling()[0].message
    assert message.startswith("0/25 nodes are available:")
    assert "Insufficient nvidia.com/gpu" in message


def test_scheduled_pods_run_and_daemonset_pods_land_on_every_gpu_node(real: RealCluster) -> None:
    core = real.core()

    def exporter_pods() -> list[client.V1Pod]:
        return core.list_namespaced_pod(
            "gpu-operator", label_selector="app=nvidia-dcgm-exporter"
        ).items

    wait_for(
        lambda: sum(p.status.phase == "Running" for p in exporter_pods()) == 24,
        timeout=90,
        what="24 running dcgm-exporter pods",
    )
    running = {p.spec.node_name for p in exporter_pods() if p.status.phase == "Running"}
    assert len(running) == 24
    pod = exporter_pods()[0]
    (owner,) = pod.metadata.owner_references
    assert (owner.kind, owner.controller) == ("DaemonSet", True)


def evict(core: client.CoreV1Api, name: str, namespace: str) -> int:
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    try:
        core.create_namespaced_pod_eviction(name, namespace, body)
    except ApiException as error:
        return int(error.status)
    return 201


def test_k1_a_budget_counts_the_controllers_scale_and_blocks_a_second_eviction(
    real: RealCluster,
) -> None:
    """maxUnavailable 1 over a Deployment of 3: after one eviction, the next is refused
    (429) until the replacement is Ready; kubesim's own server let it through."""
    api = real.api_client()
    core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    namespace = "budget"
    core.create_namespace({"metadata": {"name": namespace}})
    labels = {"app": "server"}
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "server"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "main", "image": "server:1"}],
                        "tolerations": [{"operator": "Exists"}],
                        # A replacement stays Pending: nowhere for it to go.
                        "nodeSelector": {"replacement": "nowhere"},
                    },
                },
            },
        },
    )
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "server"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
        },
    )
    # The three first pods are placed by hand on nodes labelled for them.
    nodes = ["a100-reserve-000", "a100-reserve-001", "a100-reserve-002"]
    for name in nodes:
        core.patch_node(name, {"metadata": {"labels": {"replacement": "nowhere"}}})
    wait_for(
        lambda: (
            sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items) == 3
        ),
        timeout=90,
        what="three running replicas",
    )
    for name in nodes:
        core.patch_node(name, {"metadata": {"labels": {"replacement": None}}})

    def allowed() -> int:
        budget = policy.read_namespaced_pod_disruption_budget("server", namespace)
        return budget.status.disruptions_allowed or 0

    wait_for(lambda: allowed() == 1, timeout=60, what="the budget to allow one disruption")
    first, second = (p.metadata.name for p in core.list_namespaced_pod(namespace).items[:2])
    assert evict(core, first, namespace) == 201
    time.sleep(2)  # the disruption controller and the ReplicaSet controller have reacted
    budget = policy.read_namespaced_pod_disruption_budget("server", namespace).status
    assert budget.expected_pods == 3  # the controller's scale, not the pods left
    assert evict(core, second, namespace) == 429


def test_k2_a_no_execute_taint_evicts_pods_that_do_not_tolerate_it(real: RealCluster) -> None:
    core = real.core()
    node = "a100-reserve-003"
    pods = lambda: [  # noqa: E731
        p
        for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        if not p.metadata.deletion_timestamp
    ]
    exporter = [p for p in pods() if p.metadata.namespace == "gpu-operator"]
    workload = [p for p in pods() if p.metadata.namespace != "gpu-operator"]
    assert workload, "the demo places a pod on every reserve node"
    taint = {"key": "workload-maintenance", "value": "true", "effect": "NoExecute"}
    core.patch_node(node, {"spec": {"taints": [taint]}})
    wait_for(
        lambda: not [p for p in pods() if p.metadata.namespace != "gpu-operator"],
        timeout=60,
        what="the workload evicted",
    )
    # dcgm-exporter tolerates only NoSchedule from the operator's template, plus the daemon
    # tolerations: it is evicted too (and the DaemonSet controller does not place it back).
    assert exporter
    core.patch_node(node, {"spec": {"taints": None}})


def test_k4_a_finalizer_holds_a_deleted_pod(real: RealCluster) -> None:
    core = real.core()
    pod = {
        "metadata": {"name": "held", "namespace": "default", "finalizers": ["example.com/hold"]},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1"}],
            "nodeName": "a100-reserve-004",
            "terminationGracePeriodSeconds": 1,
        },
    }
    core.create_namespaced_pod("default", pod)
    core.delete_namespaced_pod("held", "default")
    time.sleep(3)  # the grace period and the kubelet's final DELETE are over
    held = core.read_namespaced_pod("held", "default")
    assert held.metadata.deletion_timestamp is not None
    assert held.status.phase in ("Succeeded", "Failed")
    core.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})
    wait_for(
        lambda: "held" not in {p.metadata.name for p in core.list_namespaced_pod("default").items},
        timeout=30,
        what="the pod gone once its finalizer is",
    )


def test_a_pod_force_deleted_in_its_grace_period_gets_no_late_delete(real: RealCluster) -> None:
    """A kubelet stops caring for a pod the API server no longer has: once a graceful
    deletion is cut short by a forced one, it sends nothing when the grace period would
    have ended (a late DELETE would hit a pod made again under the same name)."""
    core = real.core()
    _running_pod(core, "cut-short", grace=600)
    core.delete_namespaced_pod("cut-short", "default")  # ten minutes to go
    core.delete_namespaced_pod("cut-short", "default", grace_period_seconds=0)
    # The kubelet watches pods in order: once it has started a pod made after these two
    # deletions, it has seen both (the graceful one first, its end scheduled).
    _running_pod(core, "marker", grace=0)
    since = real.audit_log.stat().st_size
    real.control("clock", {"advance": 700})
    time.sleep(1)  # the kubelet's timers run every 0.2 s
    kubelet = real.plane.tokens["kubelet"].user
    with real.audit_log.open("rb") as log:
        log.seek(since)
        late = [
            (e["verb"], e.get("responseStatus", {}).get("code"))
            for e in map(json.loads, log.read().splitlines())
            if e["user"]["username"] == kubelet
            and e.get("objectRef", {}).get("name") == "cut-short"
        ]
    assert late == []
    core.delete_namespaced_pod("marker", "default", grace_period_seconds=0)


def _running_pod(core: client.CoreV1Api, name: str, grace: int) -> None:
    pod = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1"}],
            "nodeName": "a100-reserve-004",
            "terminationGracePeriodSeconds": grace,
        },
    }
    core.create_namespaced_pod("default", pod)
    wait_for(
        lambda: core.read_namespaced_pod(name, "default").status.phase == "Running",
        timeout=30,
        what=f"{name} running",
    )


def test_k3_impersonation_answers_for_the_impersonated_user(real: RealCluster) -> None:
    someone = "system:serviceaccount:default:nobody"
    done = kubectl(real, "auth", "can-i", "patch", "nodes", f"--as={someone}")
    assert (done.stdout.strip(), done.returncode) == ("no", 1)
    done = kubectl(real, "auth", "can-i", "patch", "nodes")
    assert (done.stdout.strip(), done.returncode) == ("yes", 0)
    review = client.AuthorizationV1Api(real.api_client()).create_subject_access_review(
        {
            "spec": {
                "user": someone,
                "resourceAttributes": {"verb": "patch", "resource": "nodes"},
            }
        }
    )
    assert review.status.allowed is False


def test_kubectl_describe_node_reads_its_lease(real: RealCluster) -> None:
    done = kubectl(real, "describe", "node", "a100-reserve-005")
    assert done.returncode == 0, done.stderr
    assert "Lease:" in done.stdout and "HolderIdentity:  a100-reserve-005" in done.stdout


def test_the_kubelets_exporter_reports_their_nodes_and_pods(real: RealCluster) -> None:
    with urllib.request.urlopen(f"{real.metrics_url}/metrics/node/a100-reserve-000") as answer:
        text = answer.read().decode()
    lines = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(lines) == 8
    assert sum('pod="notebook-a100-reserve-000"' in line for line in lines) == 1
    real.control("gpus", {"node": "a100-reserve-000", "gpu": 3, "xid": 79})
    with urllib.request.urlopen(f"{real.metrics_url}/metrics/node/a100-reserve-000") as answer:
        text = answer.read().decode()
    assert 'DCGM_FI_DEV_XID_ERRORS{gpu="3"' in text and 'err_code="79"' in text
    assert json.loads(json.dumps(real.control("exporter", {"node": "a100-reserve-000"})))


def test_k6_an_invalid_budget_is_refused(real: RealCluster) -> None:
    policy = client.PolicyV1Api(real.api_client())
    budget = {
        "metadata": {"name": "both"},
        "spec": {
            "minAvailable": 1,
            "maxUnavailable": "abc%",
            "selector": {"matchLabels": {"app": "x"}},
        },
    }
    with pytest.raises(ApiException) as refused:
        policy.create_namespaced_pod_disruption_budget("default", budget)
    assert refused.value.status == 422
    fields = {c["field"] for c in json.loads(refused.value.body)["details"]["causes"]}
    assert "spec" in fields or "spec.minAvailable" in fields or "spec.maxUnavailable" in fields


def test_k13_an_eviction_sent_as_a_pod_is_refused(real: RealCluster) -> None:
    core = real.core()
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook-a100-reserve-001"}}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("notebook-a100-reserve-001", "research", body)
    assert refused.value.status == 400
