"""The fit check against kubesim's scheduler, on the same cluster, pod by pod.

Each case reads the demo cluster from a fresh kubesim (the portal's own test cluster, over
real HTTP), asks the fit check where a pod would land, then creates the pod and reads what
kubesim's scheduler did: bound to one of the nodes the check named, or Pending with the same
reasons on the same number of nodes. Only filters kubesim implements are exercised here
(unschedulable, taints, nodeSelector, matchExpressions, GPUs). Where kubesim differs from
kube-scheduler, it is fixed in kubesim (reason order, preemption text, a tolerated cordon,
matchFields, init containers' GPUs: the tests at the end); what remains is in docs/kubesim.md.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from pools.core.fit.api_objects import fit_nodes
from pools.core.fit.check import check_pod
from pools.core.fit.cluster import ClusterSnapshot, FitPool
from pools.core.fit.verdicts import PodVerdict
from pools.core.taints import Taint
from tests.kubesim_process import Kubesim

POOL_KEY = "gpu-pool"
POOLS = [
    FitPool("training", {"workload-type": "training"}, Taint("workload-training", "true")),
    FitPool("inference", {"workload-type": "inference"}, Taint("workload-inference", "true")),
    FitPool("mixed", {"workload-type": "mixed"}),
]
NAMESPACE = "research"


def snapshot_of(kubesim: Kubesim) -> ClusterSnapshot:
    api = kubesim.api_client()
    core = client.CoreV1Api(api)
    nodes = [api.sanitize_for_serialization(n) for n in core.list_node().items]
    pods = [api.sanitize_for_serialization(p) for p in core.list_pod_for_all_namespaces().items]
    return ClusterSnapshot(fit_nodes(nodes, pods, pool_key=POOL_KEY), POOLS)


def verdict(kubesim: Kubesim, pod: dict[str, Any]) -> PodVerdict:
    report = check_pod(pod, snapshot_of(kubesim), pool_key=POOL_KEY, with_fixes=False)
    return report.workloads[0].cluster[0]


def create(kubesim: Kubesim, pod: dict[str, Any]) -> tuple[str | None, str]:
    """Create the pod: the node the scheduler bound it to, or None and its Unschedulable
    text. kubesim's scheduler has decided when the create answers; the real one decides a
    moment later, so the pod is read until it has (the namespace made first: only kubesim
    makes namespaces up from the pods)."""
    from kubernetes.client.rest import ApiException

    core = kubesim.core()
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as error:
        if error.status not in (404, 405, 409):  # kubesim serves namespaces read-only
            raise
    core.create_namespaced_pod(NAMESPACE, pod)
    deadline = time.monotonic() + 30
    while True:
        created = core.read_namespaced_pod(pod["metadata"]["name"], NAMESPACE)
        if created.spec.node_name:
            return created.spec.node_name, ""
        conditions = [c for c in created.status.conditions or [] if c.type == "PodScheduled"]
        if conditions and conditions[0].reason == "Unschedulable":
            return None, conditions[0].message
        assert time.monotonic() < deadline, f"{pod['metadata']['name']} was never scheduled"
        time.sleep(0.05)


def reasons_of(message: str) -> dict[str, int]:
    """`0/25 nodes are available: 4 a, 21 b. preemption: ...` -> {"a": 4, "b": 21}."""
    filters = message.split(". preemption: ")[0]
    listed = filters.split(" nodes are available: ", 1)[1].rstrip(".")
    counts = {}
    for item in listed.split(", "):
        count, reason = item.split(" ", 1)
        counts[reason] = int(count)
    return counts


def gpu_pod(
    name: str,
    gpus: int,
    *,
    selector: dict[str, str] | None = None,
    expressions: list[dict[str, Any]] | None = None,
    fields: list[dict[str, Any]] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    init_gpus: int = 0,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "trainer:1",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ]
    }
    if init_gpus:
        spec["initContainers"] = [
            {
                "name": "warm",
                "image": "warm:1",
                "resources": {"limits": {"nvidia.com/gpu": str(init_gpus)}},
            }
        ]
    if selector:
        spec["nodeSelector"] = selector
    if expressions is not None or fields is not None:
        term: dict[str, Any] = {}
        if expressions is not None:
            term["matchExpressions"] = expressions
        if fields is not None:
            term["matchFields"] = fields
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


TOLERATE_INFERENCE = [{"key": "workload-inference", "operator": "Exists", "effect": "NoSchedule"}]
IN_TRAINING = [{"key": POOL_KEY, "operator": "In", "values": ["training"]}]


def assert_same(kubesim: Kubesim, pod: dict[str, Any]) -> tuple[PodVerdict, str | None, str]:
    expected = verdict(kubesim, pod)
    node, message = create(kubesim, pod)
    assert (node is not None) == expected.fits, (node, message, expected)
    if node is not None:
        assert node in expected.nodes_fit
    else:
        assert reasons_of(message) == dict(expected.reasons)
        assert message.startswith(f"0/{expected.nodes_total} nodes are available: ")
    return expected, node, message


@pytest.mark.parametrize(
    "pod",
    [
        gpu_pod("mixed-1", 1, selector={POOL_KEY: "mixed"}),
        gpu_pod("anywhere-4", 4),
        gpu_pod("inference-3", 3, selector={POOL_KEY: "inference"}, tolerations=TOLERATE_INFERENCE),
        gpu_pod("new-gpus", 4, expressions=[{"key": POOL_KEY, "operator": "DoesNotExist"}]),
        gpu_pod(
            "big-a100s",
            2,
            expressions=[
                {"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]},
                {"key": POOL_KEY, "operator": "NotIn", "values": ["training", "inference"]},
                {"key": POOL_KEY, "operator": "Exists"},
            ],
        ),
        gpu_pod("everything-8", 8, tolerations=[{"operator": "Exists"}]),
    ],
    ids=lambda pod: pod["metadata"]["name"],
)
def test_pods_that_fit_land_on_a_node_the_check_named(
    kubesim: Kubesim, pod: dict[str, Any]
) -> None:
    expected, node, _ = assert_same(kubesim, pod)
    assert node is not None and expected.fits


def test_tolerating_everything_lands_on_the_not_ready_node(kubesim: Kubesim) -> None:
    # Only the down node has 8 free GPUs; an empty-key Exists toleration ignores not-ready too.
    expected, node, _ = assert_same(
        kubesim, gpu_pod("greedy", 8, tolerations=[{"operator": "Exists"}])
    )
    assert expected.nodes_fit == ("a100-reserve-down-000",)
    assert node == "a100-reserve-down-000"


@pytest.mark.parametrize(
    "pod",
    [
        gpu_pod("train-no-toleration", 2, expressions=IN_TRAINING),
        gpu_pod("sixteen", 16),
        gpu_pod(
            "lt-two",
            1,
            expressions=[{"key": "nvidia.com/gpu.count", "operator": "Lt", "values": ["2"]}],
        ),
        gpu_pod("inference-9", 9, selector={POOL_KEY: "inference"}, tolerations=TOLERATE_INFERENCE),
    ],
    ids=lambda pod: pod["metadata"]["name"],
)
def test_pods_that_do_not_fit_get_the_same_reasons(kubesim: Kubesim, pod: dict[str, Any]) -> None:
    expected, node, _ = assert_same(kubesim, pod)
    assert node is None and not expected.fits


def test_the_demo_message_for_a_training_pod_without_toleration(kubesim: Kubesim) -> None:
    expected, _, _ = assert_same(kubesim, gpu_pod("eval-x", 2, expressions=IN_TRAINING))
    assert dict(expected.reasons) == {
        "node(s) had untolerated taint {workload-training: true}": 4,
        "node(s) had untolerated taint {workload-inference: true}": 8,
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
        "node(s) didn't match Pod's node affinity/selector": 11,
        "Insufficient nvidia.com/gpu": 1,  # the drifted training node, filled by eval-job-0/1
    }
    # kube-scheduler sorts the "count reason" strings themselves.
    assert expected.message == (
        "0/25 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated "
        "taint {node.kubernetes.io/unreachable: }, 11 node(s) didn't match Pod's node "
        "affinity/selector, 4 node(s) had untolerated taint {workload-training: true}, 8 node(s) "
        "had untolerated taint {workload-inference: true}."
    )


def test_one_reason_everywhere_gives_the_same_text_word_for_word(kubesim: Kubesim) -> None:
    pod = gpu_pod(
        "nowhere", 1, selector={POOL_KEY: "no-such-pool"}, tolerations=[{"operator": "Exists"}]
    )
    expected, _, message = assert_same(kubesim, pod)
    assert (
        message
        == expected.scheduler_message
        == (
            "0/25 nodes are available: 25 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/25 nodes are available: 25 Preemption is not helpful for scheduling."
        )
    )


def test_replicas_that_fit_is_how_many_kubesim_binds(kubesim: Kubesim) -> None:
    # Inference has 5 A100 nodes with 3 GPUs free and 3 H100 nodes with 4 free: 27 one-GPU pods.
    template = gpu_pod("serve", 1, selector={POOL_KEY: "inference"}, tolerations=TOLERATE_INFERENCE)
    report = check_pod(template, snapshot_of(kubesim), pool_key=POOL_KEY, with_fixes=False)
    assert report.workloads[0].cluster[0].room == 27
    assert report.workloads[0].pool("inference").templates[0].room == 27
    bound = 0
    for number in range(30):
        pod = {**template, "metadata": {"name": f"serve-{number}"}}
        if number < 29:
            node, _ = create(kubesim, pod)
            bound += node is not None
        else:
            assert_same(kubesim, pod)
    assert bound == 27


def test_a_gpu_pool_filled_by_the_check_count_leaves_the_next_pod_pending(kubesim: Kubesim) -> None:
    pod = gpu_pod(
        "train-8",
        8,
        expressions=IN_TRAINING,
        tolerations=[{"key": "workload-training", "operator": "Exists"}],
    )
    expected = verdict(kubesim, pod)
    assert not expected.fits  # every tainted training node runs an 8-GPU job; big-train waits too
    kubesim.core().delete_namespaced_pod("llm-pretrain-a100-train-001", "ml-training")
    kubesim.core().delete_namespaced_pod("big-train", "ml-training")
    # A deleted pod holds its node's GPUs until its grace period ends, for both.
    assert not verdict(kubesim, pod).fits
    kubesim.control("clock", {"advance": 31})
    expected, node, _ = assert_same(kubesim, pod)
    assert expected.nodes_fit == ("a100-train-001",) and node == "a100-train-001"


def test_a_cordoned_node_is_unschedulable_for_both(kubesim: Kubesim) -> None:
    kubesim.core().patch_node("a100-reserve-003", {"spec": {"unschedulable": True}})
    pod = gpu_pod("pinned", 1, selector={"kubernetes.io/hostname": "a100-reserve-003"})
    expected, node, _ = assert_same(kubesim, pod)
    assert node is None
    # NodeUnschedulable runs first, then TaintToleration, then NodeAffinity.
    assert dict(expected.reasons) == {
        "node(s) were unschedulable": 1,
        "node(s) had untolerated taint {workload-training: true}": 4,
        "node(s) had untolerated taint {workload-inference: true}": 8,
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
        "node(s) didn't match Pod's node affinity/selector": 11,
    }


# --- where kubesim's scheduler used to differ from kube-scheduler ---


def test_kubesim_orders_reasons_like_kube_scheduler(kubesim: Kubesim) -> None:
    pod = gpu_pod("eval-y", 2, expressions=IN_TRAINING)
    expected = verdict(kubesim, pod)
    _, message = create(kubesim, pod)
    assert message.split(" preemption: ")[0] == expected.message


def test_kubesim_preemption_text_for_nodes_short_of_gpus(kubesim: Kubesim) -> None:
    pod = gpu_pod("big-mixed", 8, selector={POOL_KEY: "mixed"})
    expected = verdict(kubesim, pod)
    assert "9 No preemption victims found for incoming pod" in expected.preemption
    _, message = create(kubesim, pod)
    assert message == expected.scheduler_message


def test_kubesim_honours_a_toleration_of_the_cordon(kubesim: Kubesim) -> None:
    kubesim.core().patch_node("a100-reserve-004", {"spec": {"unschedulable": True}})
    pod = gpu_pod(
        "cordon-ok",
        1,
        selector={"kubernetes.io/hostname": "a100-reserve-004"},
        tolerations=[
            {
                "key": "node.kubernetes.io/unschedulable",
                "operator": "Exists",
                "effect": "NoSchedule",
            }
        ],
    )
    assert verdict(kubesim, pod).nodes_fit == ("a100-reserve-004",)
    assert create(kubesim, pod)[0] == "a100-reserve-004"


def test_kubesim_honours_match_fields(kubesim: Kubesim) -> None:
    pod = gpu_pod(
        "by-name", 1, fields=[{"key": "metadata.name", "operator": "In", "values": ["gpu-new-001"]}]
    )
    assert verdict(kubesim, pod).nodes_fit == ("gpu-new-001",)
    assert create(kubesim, pod)[0] == "gpu-new-001"


def test_kubesim_counts_init_container_gpus(kubesim: Kubesim) -> None:
    pod = gpu_pod("warm-up", 1, selector={POOL_KEY: "mixed"}, init_gpus=8)
    expected = verdict(kubesim, pod)
    assert not expected.fits  # no mixed node has 8 free GPUs
    node, _ = create(kubesim, pod)
    assert node is None
