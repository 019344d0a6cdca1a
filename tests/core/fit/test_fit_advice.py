"""What a platform engineer would say: each finding, when it is said and when it is not."""

from __future__ import annotations

from typing import Any

from pools.core.fit.cluster import NodePod
from pools.core.fit.findings import Finding
from pools.core.fit.resources import Resources
from tests.core.fit.builders import gang, node, pod, report, snapshot


def findings(snap: Any, obj: dict[str, Any], **options: Any) -> dict[str, list[Finding]]:
    by_code: dict[str, list[Finding]] = {}
    for finding in report(snap, obj, **options).findings:
        by_code.setdefault(finding.code, []).append(finding)
    return by_code


def cluster() -> Any:
    return snapshot(
        node("t0", "training"),
        node("t1", "training", used=8),
        node("i0", "inference"),
        node("m0", "mixed", used=1),
        node("new0", gpus=4, product="NVIDIA-L40S"),
    )


def test_gpu_request_without_pool_affinity_says_where_it_would_land() -> None:
    found = findings(cluster(), pod(1))
    [finding] = found["gpu-without-pool-affinity"]
    assert finding.severity == "warning" and finding.document == 1
    assert "today it would land in: nodes in no pool, pool mixed" in finding.message
    assert "gpu-without-pool-affinity" not in findings(cluster(), pod(1, pool="mixed"))
    assert "gpu-without-pool-affinity" not in findings(
        cluster(), pod(1, nodeSelector={"gpu-pool": "mixed"})
    )


def test_cpu_pods_are_not_told_to_pin_a_pool_but_are_told_when_they_sit_on_gpu_nodes() -> None:
    cpu_only = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    assert "gpu-without-pool-affinity" not in findings(cluster(), pod(0, **cpu_only))
    pinned = findings(cluster(), pod(0, pool="mixed", **cpu_only))
    assert [f.severity for f in pinned["pool-without-gpu-request"]] == ["info"]


def test_a_toleration_of_everything() -> None:
    found = findings(cluster(), pod(1, pool="training", tolerations=[{"operator": "Exists"}]))
    [finding] = found["tolerates-everything"]
    assert finding.path == "spec.tolerations[0]"
    assert "every taint" in finding.message and "not even evicted" in finding.message
    scoped = findings(
        cluster(), pod(1, tolerations=[{"operator": "Exists", "effect": "NoSchedule"}])
    )
    assert "every NoSchedule taint" in scoped["tolerates-everything"][0].message
    assert "tolerates-everything" not in findings(cluster(), pod(1, tolerate="workload-training"))


def test_gpu_model_asked_by_label_that_the_pool_lacks() -> None:
    l40s = pod(1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L40S"})
    by_pool = {f.pool: f.message for f in findings(cluster(), l40s)["gpu-model-not-in-pool"]}
    assert by_pool["training"].endswith(
        "pool training has NVIDIA-A100-SXM4-80GB."
    )  # accepted models
    assert by_pool["mixed"].endswith(
        "pool mixed has NVIDIA-A100-SXM4-80GB."
    )  # what its nodes carry
    a100 = pod(1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    assert "gpu-model-not-in-pool" not in findings(cluster(), a100)
    # Pinned to a pool, it hears only about that pool.
    pinned = pod(1, pool="mixed", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L40S"})
    assert [f.pool for f in findings(cluster(), pinned)["gpu-model-not-in-pool"]] == ["mixed"]


def test_gpu_limit_without_request_is_only_information() -> None:
    [finding] = findings(cluster(), pod(2, pool="mixed"))["gpu-limit-defaults-request"]
    assert finding.severity == "info" and "(2 GPUs for the pod)" in finding.message
    explicit = {
        "containers": [
            {
                "name": "c",
                "resources": {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 2}},
            }
        ]
    }
    assert "gpu-limit-defaults-request" not in findings(cluster(), pod(2, pool="mixed", **explicit))


def test_request_not_equal_to_limit_is_what_the_api_server_refuses() -> None:
    spec = {
        "containers": [
            {
                "name": "c",
                "resources": {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 1}},
            }
        ]
    }
    [finding] = findings(cluster(), pod(pool="mixed", **spec))["request-not-limit"]
    assert finding.severity == "error"
    assert finding.message == (
        'spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
        "nvidia.com/gpu limit of 2"
    )


def test_priority_instead_of_isolation_and_what_preemption_would_evict() -> None:
    snap = snapshot(
        node("t0", "training", pods=(NodePod(Resources(gpu=8), 0, "train/a"),)),
        node("m0", "mixed", pods=(NodePod(Resources(gpu=8), 0, "research/b"),)),
    )
    found = findings(
        snap,
        pod(8, priorityClassName="high", tolerations=[{"operator": "Exists"}]),
        priority_classes={"high": 100000},
    )
    assert "isolates nothing" in found["priority-instead-of-isolation"][0].message
    [would] = found["would-preempt"]
    assert "evict lower-priority pods on 2 nodes (t0, m0) in mixed, training" in would.message
    pinned = findings(
        snap, pod(8, pool="mixed", priorityClassName="high"), priority_classes={"high": 100000}
    )
    assert "priority-instead-of-isolation" not in pinned
    assert "m0" in pinned["would-preempt"][0].message


def test_an_unknown_priority_class_is_refused_by_the_api_server() -> None:
    found = findings(
        cluster(), pod(1, pool="mixed", priorityClassName="hgih"), priority_classes={"high": 1000}
    )
    assert "no PriorityClass with name hgih was found" in found["unknown-priority-class"][0].message
    assert "unknown-priority-class" not in findings(
        cluster(), pod(1, pool="mixed", priorityClassName="hgih")
    )


def test_a_gang_larger_than_the_pools_free_whole_nodes() -> None:
    job = gang("PyTorchJob", 3, pool="training", tolerate="workload-training")
    by_pool = {f.pool: f for f in findings(cluster(), job)["gang-larger-than-free-nodes"]}
    # Training takes its pods but has one whole free node; the other pools refuse them outright.
    assert list(by_pool) == ["training"]
    assert by_pool["training"].message == (
        "PyTorchJob llm: a gang of 4 pods (8/8 GPU each) cannot start at once in pool "
        "training: room for 1 now; the pool has 1 whole free node, the largest free block "
        "is 8 GPUs. Without a gang scheduler, some pods start and hold their GPUs while the "
        "rest wait."
    )
    small = gang("PyTorchJob", 0, pool="training", tolerate="workload-training")
    assert "gang-larger-than-free-nodes" not in findings(cluster(), small)


def test_the_verdicts_own_limits_are_said() -> None:
    found = findings(cluster(), pod(1, pool="mixed", nodeName="m0", schedulerName="volcano"))
    assert found["node-name-set"][0].severity == "warning"
    assert found["other-scheduler"][0].severity == "info"


def test_invalid_tolerations_and_affinity_in_the_api_servers_words() -> None:
    bad = pod(
        1,
        tolerations=[
            {"key": "", "operator": "Equal", "value": "x"},
            {"key": "a", "operator": "Exists", "value": "x"},
            {"key": "a", "effect": "NoSchedul"},
            {"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5},
            {"key": "a", "efect": "NoSchedule"},
        ],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu-pool", "operator": "In"}]}
                    ]
                }
            }
        },
    )
    messages = [f.message for f in report(cluster(), bad).findings if f.severity == "error"]
    assert messages == [
        'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` '
        'is empty, which means "match all values and all keys"',
        'spec.tolerations[1].operator: Invalid value: "x": value must be empty when `operator` '
        "is 'Exists'",
        'spec.tolerations[2].effect: Unsupported value: "NoSchedul": supported values: '
        '"NoExecute", "NoSchedule", "PreferNoSchedule"',
        "spec.tolerations[3].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' "
        "when `tolerationSeconds` is set",
        'spec.tolerations[4].efect: unknown field "spec.tolerations[4].efect" (strict decoding '
        "refuses it, and it does nothing)",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
        "nodeSelectorTerms[0].matchExpressions[0]: for 'in', 'notin' operators, values set "
        "can't be empty; the scheduler cannot use this term, so it matches no node",
    ]


def test_a_gpu_model_no_node_has_is_said_once_and_no_fix_is_offered() -> None:
    h100 = pod(1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    checked = report(cluster(), h100)
    found = findings(cluster(), h100)
    [finding] = found["gpu-model-not-in-cluster"]
    assert not finding.pool and finding.severity == "warning"
    assert (
        "no node in the cluster has that model "
        "(the cluster has NVIDIA-A100-SXM4-80GB, NVIDIA-L40S)" in finding.message
    )
    # The pool-affinity warning does not blame room, and no pool hears it again.
    [unpinned] = found["gpu-without-pool-affinity"]
    assert "today no node has the GPU model it asks for" in unpinned.message
    assert "room" not in unpinned.message.split("(")[-1]
    assert "gpu-model-not-in-pool" not in found
    # Every pool's fix would keep the selector no node matches: none is offered.
    assert checked.fixes == {}


def test_a_fix_is_offered_only_where_a_node_has_the_gpu_model_asked() -> None:
    snap = snapshot(
        node("t0", "training"),
        node("i0", "inference", gpus=4, product="NVIDIA-L40S"),
        node("m0", "mixed"),
    )
    l40s = pod(1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L40S"})
    assert set(report(snap, l40s).fixes) == {"inference"}
    assert "gpu-model-not-in-cluster" not in findings(snap, l40s)
    either = pod(
        1,
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.product",
                                    "operator": "In",
                                    "values": ["NVIDIA-L40S", "NVIDIA-A100-SXM4-80GB"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
    )
    assert set(report(snap, either).fixes) == {"training", "inference", "mixed"}
    assert set(report(snap, pod(1)).fixes) == {"training", "inference", "mixed"}
