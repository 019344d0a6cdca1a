"""kubesim's scheduler counts every extended resource a pod asks for, as NodeResourcesFit
does: MIG profiles of the mixed strategy, renamed shared GPUs, and the reasons of a pod
that fits nowhere, one per resource a node lacks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.kubesim_process import Kubesim, kubesim_server

NAMESPACE = "scheduling-tests"


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("devices"), scenario="devices") as sim:
        yield sim


@pytest.fixture
def core(devices: Kubesim) -> Iterator[client.CoreV1Api]:
    api = devices.core()
    yield api
    for pod in api.list_namespaced_pod(NAMESPACE).items:
        api.delete_namespaced_pod(pod.metadata.name, NAMESPACE, grace_period_seconds=0)


def create(core: client.CoreV1Api, name: str, limits: dict[str, str]) -> client.V1Pod:
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="server:1",
                    resources=client.V1ResourceRequirements(limits=limits),
                )
            ]
        ),
    )
    return core.create_namespaced_pod(NAMESPACE, pod)


def unschedulable(pod: client.V1Pod) -> str:
    (condition,) = pod.status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    return str(condition.message)


def test_a_profile_no_node_offers_is_insufficient_everywhere(core: client.CoreV1Api) -> None:
    pod = create(core, "h200-slice", {"nvidia.com/mig-4g.71gb": "1"})
    assert pod.spec.node_name is None
    assert unschedulable(pod) == (
        "0/9 nodes are available: 9 Insufficient nvidia.com/mig-4g.71gb. "
        "preemption: 0/9 nodes are available: 9 Preemption is not helpful for scheduling."
    )
    # The scenario's own pod waits for the same reason.
    waiting = core.read_namespaced_pod("big-slice", "ml-serving")
    assert "9 Insufficient nvidia.com/mig-4g.71gb" in unschedulable(waiting)


def test_a_mig_slice_lands_on_a_mixed_strategy_node(core: client.CoreV1Api) -> None:
    pod = create(core, "slice", {"nvidia.com/mig-1g.10gb": "1"})
    assert pod.spec.node_name in ("h100-mig-000", "h100-mig-001")
    assert pod.status.phase == "Running"


def test_a_renamed_shared_gpu_is_found_by_its_name(core: client.CoreV1Api) -> None:
    pod = create(core, "shared", {"nvidia.com/gpu.shared": "2"})
    assert pod.spec.node_name == "l4-mps-000"


def test_each_resource_a_node_lacks_is_a_reason(core: client.CoreV1Api) -> None:
    pod = create(core, "both", {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "1"})
    # The mixed nodes and the renamed MPS node have no nvidia.com/gpu; all but the mixed
    # nodes have no nvidia.com/mig-1g.10gb.
    assert unschedulable(pod) == (
        "0/9 nodes are available: 3 Insufficient nvidia.com/gpu, "
        "7 Insufficient nvidia.com/mig-1g.10gb. "
        "preemption: 0/9 nodes are available: 9 Preemption is not helpful for scheduling."
    )


def test_the_units_held_on_a_node_are_counted(core: client.CoreV1Api) -> None:
    # 56 instances a mixed node, 2 held by the scenario's pods: 55 fit on neither.
    pod = create(core, "too-many", {"nvidia.com/mig-1g.10gb": "55"})
    assert unschedulable(pod) == (
        "0/9 nodes are available: 9 Insufficient nvidia.com/mig-1g.10gb. "
        "preemption: 0/9 nodes are available: 2 No preemption victims found for incoming "
        "pod, 7 Preemption is not helpful for scheduling."
    )
    fits = create(core, "all-left", {"nvidia.com/mig-1g.10gb": "54"})
    assert fits.spec.node_name == "h100-mig-000"
    # What is left on the other mixed node now.
    last = create(core, "the-rest", {"nvidia.com/mig-1g.10gb": "54"})
    assert last.spec.node_name == "h100-mig-001"
    assert create(core, "one-more", {"nvidia.com/mig-1g.10gb": "1"}).spec.node_name is None


def test_a_pending_pod_binds_once_its_units_are_free(
    devices: Kubesim, core: client.CoreV1Api
) -> None:
    create(core, "fill", {"nvidia.com/gpu.shared": "29"})  # 32 replicas, 3 held
    waiting = create(core, "waiting", {"nvidia.com/gpu.shared": "1"})
    assert waiting.spec.node_name is None
    assert unschedulable(waiting).endswith(
        "1 No preemption victims found for incoming pod, "
        "8 Preemption is not helpful for scheduling."
    )
    core.delete_namespaced_pod("fill", NAMESPACE, grace_period_seconds=0)
    devices.control("schedule", {})
    assert core.read_namespaced_pod("waiting", NAMESPACE).spec.node_name == "l4-mps-000"
