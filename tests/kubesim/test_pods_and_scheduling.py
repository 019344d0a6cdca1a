"""Pods in kubesim: listing, the small scheduler and its reasons, eviction with budgets."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kubesim_process import Kubesim

GPU = "nvidia.com/gpu"


def gpu_pod(
    name: str,
    gpus: int,
    *,
    pool: str | None = None,
    tolerate: str | None = None,
    labels: dict[str, str] | None = None,
) -> client.V1Pod:
    spec = client.V1PodSpec(
        containers=[
            client.V1Container(
                name="main",
                image="trainer:1",
                resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": str(gpus)}),
            )
        ]
    )
    if pool:
        spec.affinity = client.V1Affinity(
            node_affinity=client.V1NodeAffinity(
                required_during_scheduling_ignored_during_execution=client.V1NodeSelector(
                    node_selector_terms=[
                        client.V1NodeSelectorTerm(
                            match_expressions=[
                                client.V1NodeSelectorRequirement(
                                    key="gpu-pool", operator="In", values=[pool]
                                )
                            ]
                        )
                    ]
                )
            )
        )
    if tolerate:
        spec.tolerations = [
            client.V1Toleration(key=tolerate, operator="Exists", effect="NoSchedule")
        ]
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name, labels=labels), spec=spec)


def test_list_pods_across_and_within_namespaces(kubesim_shared: Kubesim) -> None:
    core = kubesim_shared.core()
    everything = core.list_pod_for_all_namespaces()
    assert {p.metadata.namespace for p in everything.items} == {
        "gpu-operator",  # the device plugin and dcgm-exporter on every GPU node
        "ml-training",
        "ml-serving",
        "research",
    }
    serving = core.list_namespaced_pod("ml-serving")
    assert serving.items and all(p.metadata.namespace == "ml-serving" for p in serving.items)


def test_pod_field_selectors(kubesim_shared: Kubesim) -> None:
    core = kubesim_shared.core()
    on_node = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=a100-infer-000")
    assert sorted(
        p.metadata.name for p in on_node.items if p.metadata.namespace != "gpu-operator"
    ) == [
        "chat-serving-a100-infer-000-0",
        "chat-serving-a100-infer-000-1",
        "embedder-a100-infer-000",
    ]
    daemons = sorted(
        p.metadata.name[:-6] for p in on_node.items if p.metadata.namespace == "gpu-operator"
    )
    assert daemons == ["nvidia-dcgm-exporter", "nvidia-device-plugin-daemonset"]
    pending = core.list_pod_for_all_namespaces(field_selector="status.phase=Pending")
    not_running = core.list_pod_for_all_namespaces(field_selector="status.phase!=Running")
    assert {p.metadata.name for p in pending.items} == {p.metadata.name for p in not_running.items}
    assert {p.metadata.name for p in pending.items} == {"eval-job-2", "big-train"}


def test_pending_pod_carries_the_schedulers_reasons(kubesim_shared: Kubesim) -> None:
    pod = kubesim_shared.core().read_namespaced_pod("eval-job-2", "ml-training")
    condition = pod.status.conditions[0]
    assert (condition.type, condition.status, condition.reason) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition.message.startswith("0/25 nodes are available: ")
    assert "4 node(s) had untolerated taint {workload-training: true}" in condition.message
    assert "11 node(s) didn't match Pod's node affinity/selector" in condition.message
    assert "1 Insufficient nvidia.com/gpu" in condition.message  # the drifted node is full


def test_a_new_pod_is_defaulted_as_the_api_server_defaults_it(kubesim_shared: Kubesim) -> None:
    """The v1 defaulting functions and the Priority plugin (K7, as test_k7_... proves on
    the real control plane)."""
    core = kubesim_shared.core()
    pod = {
        "metadata": {"name": "defaults", "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {GPU: "1"}}},
                {"name": "side", "image": "busybox:1", "ports": [{"containerPort": 80}]},
            ],
            "tolerations": [{"operator": "Exists"}],
        },
    }
    created = core.create_namespaced_pod("default", pod)
    main, side = created.spec.containers
    assert main.resources.requests == {GPU: "1"}
    assert (main.image_pull_policy, side.image_pull_policy) == ("Always", "IfNotPresent")
    assert main.termination_message_path == "/dev/termination-log"
    assert main.termination_message_policy == "File"
    assert side.ports[0].protocol == "TCP"
    assert created.spec.preemption_policy == "PreemptLowerPriority"
    # It tolerates everything: DefaultTolerationSeconds adds nothing.
    assert [(t.key, t.operator) for t in created.spec.tolerations] == [(None, "Exists")]
    core.delete_namespaced_pod("defaults", "default", grace_period_seconds=0)


def test_tolerations_for_not_ready_and_unreachable_are_added(kubesim_shared: Kubesim) -> None:
    """DefaultTolerationSeconds: 300 s of each, unless the pod tolerates it already (K7)."""
    core = kubesim_shared.core()
    pod = {
        "metadata": {"name": "tolerations", "namespace": "default"},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1"}],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 10,
                }
            ],
        },
    }
    created = core.create_namespaced_pod("default", pod)
    assert [(t.key, t.effect, t.toleration_seconds) for t in created.spec.tolerations] == [
        ("node.kubernetes.io/not-ready", "NoExecute", 10),
        ("node.kubernetes.io/unreachable", "NoExecute", 300),
    ]
    core.delete_namespaced_pod("tolerations", "default", grace_period_seconds=0)


def test_scheduler_binds_by_affinity_tolerations_and_free_gpus(kubesim: Kubesim) -> None:
    core = kubesim.core()
    # The demo's pending 8-GPU job would take the freed node first: it goes away.
    core.delete_namespaced_pod("big-train", "ml-training")
    # Frees a whole training node, so an 8-GPU job with the toleration can land.
    core.delete_namespaced_pod("llm-pretrain-a100-train-001", "ml-training", grace_period_seconds=0)
    core.create_namespaced_pod(
        "ml-training", gpu_pod("gang-0", 8, pool="training", tolerate="workload-training")
    )
    bound = core.read_namespaced_pod("gang-0", "ml-training")
    assert bound.spec.node_name == "a100-train-001"
    assert bound.status.phase == "Running"
    # Without the toleration the same pod stays Pending.
    core.create_namespaced_pod("ml-training", gpu_pod("no-toleration", 1, pool="training"))
    stuck = core.read_namespaced_pod("no-toleration", "ml-training")
    assert stuck.spec.node_name is None and stuck.status.phase == "Pending"


def test_a_pending_pod_is_bound_once_room_appears(kubesim: Kubesim) -> None:
    core = kubesim.core()
    assert core.read_namespaced_pod("big-train", "ml-training").status.phase == "Pending"
    core.delete_namespaced_pod("llm-pretrain-a100-train-002", "ml-training")
    # Its GPUs stay held while it terminates; the grace period ends, then there is room.
    kubesim.control("schedule", {})
    assert core.read_namespaced_pod("big-train", "ml-training").status.phase == "Pending"
    kubesim.control("clock", {"advance": 300})
    kubesim.control("schedule", {})
    pod = core.read_namespaced_pod("big-train", "ml-training")
    assert (pod.spec.node_name, pod.status.phase) == ("a100-train-002", "Running")


def test_eviction_deletes_the_pod(kubesim: Kubesim) -> None:
    core = kubesim.core()
    core.create_namespaced_pod_eviction(
        "notebook-a100-reserve-000",
        "research",
        client.V1Eviction(
            metadata=client.V1ObjectMeta(name="notebook-a100-reserve-000", namespace="research")
        ),
    )
    evicted = core.read_namespaced_pod("notebook-a100-reserve-000", "research")
    assert evicted.metadata.deletion_timestamp is not None
    kubesim.control("clock", {"advance": 30})
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("notebook-a100-reserve-000", "research")
    assert caught.value.status == 404


def test_eviction_respects_a_pod_disruption_budget(kubesim: Kubesim) -> None:
    core = kubesim.core()
    policy = client.PolicyV1Api(kubesim.api_client())
    policy.create_namespaced_pod_disruption_budget(
        "ml-serving",
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="chat"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available="100%",
                selector=client.V1LabelSelector(match_labels={"app": "chat-serving"}),
            ),
        ),
    )
    budget = policy.read_namespaced_pod_disruption_budget("chat", "ml-serving")
    assert budget.status.disruptions_allowed == 0
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction(
            "chat-serving-a100-infer-000-0",
            "ml-serving",
            client.V1Eviction(
                metadata=client.V1ObjectMeta(
                    name="chat-serving-a100-infer-000-0", namespace="ml-serving"
                )
            ),
        )
    assert caught.value.status == 429
    body = json.loads(caught.value.body)
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert core.read_namespaced_pod("chat-serving-a100-infer-000-0", "ml-serving")
