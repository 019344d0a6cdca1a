"""The fit verdict, case by case against kube-scheduler's filters, messages and preemption."""

from __future__ import annotations

from pools.core.fit.check import check_pod, evaluate_pod
from pools.core.fit.cluster import NO_POOL, ClusterSnapshot, NodePod, pool_capacity
from pools.core.fit.resources import Resources
from pools.core.fit.verdicts import PodVerdict
from pools.core.fit.workloads import pod_shape
from pools.core.taints import NO_EXECUTE, Taint
from tests.core.fit.builders import GI, POOL_KEY, node, pod, report, snapshot


def cluster_verdict(snap: ClusterSnapshot, obj: dict, **options: object) -> PodVerdict:
    return (
        check_pod(obj, snap, pool_key=POOL_KEY, with_fixes=False, **options).workloads[0].cluster[0]
    )


def demo_like() -> ClusterSnapshot:
    """10 tainted training nodes and 15 mixed nodes, every GPU free."""
    return snapshot(
        *(node(f"train-{i:02d}", "training") for i in range(10)),
        *(node(f"mixed-{i:02d}", "mixed") for i in range(15)),
    )


def test_the_issue_example_word_for_word() -> None:
    v = cluster_verdict(demo_like(), pod(8, pool="inference"))
    assert not v.fits
    assert v.message == (
        "0/25 nodes are available: 10 node(s) had untolerated taint {workload-training: true}, "
        "15 node(s) didn't match Pod's node affinity/selector."
    )
    assert (
        v.preemption
        == "preemption: 0/25 nodes are available: 25 Preemption is not helpful for scheduling."
    )
    assert v.scheduler_message == f"{v.message} {v.preemption}"


def test_reasons_sort_as_strings_count_first() -> None:
    snap = snapshot(
        *(node(f"t{i}", "training") for i in range(2)),
        *(node(f"m{i}", "mixed", used=8) for i in range(10)),
    )
    v = cluster_verdict(snap, pod(1))
    # "10 ..." sorts before "2 ...": kube-scheduler sorts the formatted strings.
    assert v.message == (
        "0/12 nodes are available: 10 Insufficient nvidia.com/gpu, 2 node(s) had untolerated "
        "taint {workload-training: true}."
    )
    assert v.reasons == (
        ("Insufficient nvidia.com/gpu", 10),
        ("node(s) had untolerated taint {workload-training: true}", 2),
    )


def test_the_1_35_wording_does_not_name_the_taint() -> None:
    v = cluster_verdict(demo_like(), pod(8, pool="inference"), name_taints=False)
    assert "10 node(s) had untolerated taint(s), 15 node(s)" in v.message


def test_the_first_untolerated_taint_is_named() -> None:
    snap = snapshot(node("n", taints=(Taint("a", "1"), Taint("b", "2"), Taint("c", "3"))))
    v = cluster_verdict(snap, pod(1, tolerations=[{"key": "a", "operator": "Exists"}]))
    assert v.reasons == (("node(s) had untolerated taint {b: 2}", 1),)


def test_prefer_no_schedule_and_tolerated_no_execute_do_not_block() -> None:
    taints = (Taint("soft", "", "PreferNoSchedule"), Taint("evict", "x", NO_EXECUTE))
    snap = snapshot(node("n", taints=taints))
    assert not cluster_verdict(snap, pod(1)).fits
    tolerating = pod(
        1,
        tolerations=[
            {
                "key": "evict",
                "operator": "Equal",
                "value": "x",
                "effect": NO_EXECUTE,
                "tolerationSeconds": 30,
            }
        ],
    )
    assert cluster_verdict(snap, tolerating).nodes_fit == ("n",)


def test_a_cordoned_node_unless_the_pod_tolerates_the_cordon() -> None:
    snap = snapshot(node("n", unschedulable=True, taints=(Taint("x"),)))
    assert cluster_verdict(snap, pod(1)).reasons == (("node(s) were unschedulable", 1),)
    cordon = {
        "key": "node.kubernetes.io/unschedulable",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    # NodeUnschedulable lets it through; TaintToleration is the next filter.
    assert cluster_verdict(snap, pod(1, tolerations=[cordon])).reasons == (
        ("node(s) had untolerated taint {x: }", 1),
    )


def test_a_node_that_is_not_ready_carries_the_not_ready_taint() -> None:
    snap = snapshot(
        node("down", ready=False),
        node(
            "gone", ready=False, taints=(Taint("node.kubernetes.io/unreachable", "", NO_EXECUTE),)
        ),
    )
    assert dict(cluster_verdict(snap, pod(1)).reasons) == {
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }": 1,
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
    }
    assert pool_capacity(snap, NO_POOL).usable_nodes == 0


def test_every_resource_shortage_of_a_node_is_counted() -> None:
    busy = NodePod(Resources(95_000, 1000 * GI, 0))
    snap = snapshot(node("a", max_pods=1, pods=(busy,)), node("b", pods=(busy,)))
    v = cluster_verdict(
        snap,
        pod(
            1,
            containers=[
                {
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "2", "memory": "100Gi"},
                        "limits": {"nvidia.com/gpu": 9},
                    },
                }
            ],
        ),
    )
    assert v.message == (
        "0/2 nodes are available: 1 Too many pods, 2 Insufficient cpu, 2 Insufficient memory, "
        "2 Insufficient nvidia.com/gpu."
    )


def test_a_pod_asking_for_nothing_only_needs_a_pod_slot() -> None:
    full = NodePod(Resources(96_000, 1024 * GI, 8))
    snap = snapshot(node("a", max_pods=1, pods=(full,)), node("b", max_pods=2, pods=(full,)))
    v = cluster_verdict(
        snap,
        {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": "x"},
            "spec": {"containers": [{"name": "c"}]},
        },
    )
    assert v.nodes_fit == ("b",)


def test_finished_pods_are_not_on_the_node() -> None:
    from pools.core.fit.api_objects import fit_node

    api_node = {
        "metadata": {"name": "n", "labels": {POOL_KEY: "mixed"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    done = {
        "metadata": {"name": "done"},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
        "status": {"phase": "Succeeded"},
    }
    running = {
        "metadata": {"name": "r"},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running"},
    }
    fitted = fit_node(api_node, [done, running], pool_key=POOL_KEY)
    assert (fitted.pool, fitted.max_pods, len(fitted.pods)) == ("mixed", 110, 1)
    assert fitted.allocatable == Resources(8000, 64 * GI, 4)
    assert snapshot(fitted).free[0].gpu == 3


def test_preemption_text_depends_on_what_evicting_could_do() -> None:
    low, high = NodePod(Resources(gpu=4), priority=0), NodePod(Resources(gpu=4), priority=1000)
    snap = snapshot(
        node("tainted", taints=(Taint("x"),)),
        node("too-small", gpus=4),  # the request is larger than the node: eviction cannot help
        node("same-priority", pods=(low, low)),
        node("higher", pods=(high, high)),
    )
    v = cluster_verdict(snap, pod(8))
    assert v.preemption == (
        "preemption: 0/4 nodes are available: 2 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
    # With priority 500 the pods at 0 are victims, the pods at 1000 are not.
    v = cluster_verdict(snap, pod(8, priority=500))
    assert (v.preemption, v.preempts_on) == ("", ("same-priority",))
    assert v.message.startswith("0/4 nodes are available: ")


def test_evicting_every_lower_priority_pod_may_still_not_be_enough() -> None:
    snap = snapshot(node("n", pods=(NodePod(Resources(gpu=2), 0), NodePod(Resources(gpu=6), 100))))
    v = cluster_verdict(snap, pod(8, priority=50))
    assert v.preemption == "preemption: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def test_priority_class_values_come_from_the_cluster() -> None:
    snap = snapshot(node("n", pods=(NodePod(Resources(gpu=8), 0),)))
    obj = pod(8, priorityClassName="urgent")
    assert cluster_verdict(snap, obj).preempts_on == ()
    assert cluster_verdict(snap, obj, priority_classes={"urgent": 10}).preempts_on == ("n",)
    assert cluster_verdict(snap, pod(8, priorityClassName="system-node-critical")).preempts_on == (
        "n",
    )


def test_preemption_policy_never() -> None:
    snap = snapshot(node("n", used=8))
    v = cluster_verdict(snap, pod(8, priority=10, preemptionPolicy="Never"))
    assert v.preemption == "preemption: not eligible due to preemptionPolicy=Never."


def test_pinning_node_names_narrows_the_nodes_before_the_filters() -> None:
    snap = snapshot(node("a"), node("b", used=8), node("c"))
    by_name = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
        ]
    }
    v = cluster_verdict(
        snap,
        pod(
            1,
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": by_name}},
        ),
    )
    assert v.message == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't satisfy "
        "plugin(s) [NodeAffinity]."
    )
    assert v.preemption == (
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )


def test_conflicting_name_pins_fail_before_any_node_is_looked_at() -> None:
    snap = snapshot(node("a"), node("b"))
    both = [
        {"key": "metadata.name", "operator": "In", "values": ["a"]},
        {"key": "metadata.name", "operator": "In", "values": ["b"]},
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": both}]
            }
        }
    }
    v = cluster_verdict(snap, pod(1, affinity=affinity))
    assert v.scheduler_message == (
        "0/2 nodes are available: pod affinity terms conflict. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling."
    )


def test_no_node_at_all() -> None:
    v = cluster_verdict(snapshot(), pod(1))
    assert (v.message, v.preemption) == ("no nodes available to schedule pods", "")


def test_replicas_that_fit_are_packed_one_after_another() -> None:
    snap = snapshot(
        node("a", "mixed", used=5), node("b", "mixed", used=2), node("c", "mixed", gpus=4)
    )
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve"},
        "spec": {"replicas": 5, "template": {"spec": pod(2, pool="mixed")["spec"]}},
    }
    fit = report(snap, deployment).workloads[0]
    verdict = fit.cluster[0]
    # a: 3 free -> 1 pod, b: 6 free -> 3 pods, c: 4 free -> 2 pods.
    assert (verdict.room, verdict.replicas_wanted, verdict.replicas_fit) == (6, 5, 5)
    assert verdict.nodes_fit == ("a", "b", "c")
    assert fit.fits_now and fit.pool("mixed").fits_now
    assert not fit.pool("training").fits_now
    assert fit.lands_in == (("mixed",),)


def test_nodes_look_alike_but_hostname_selectors_still_see_each() -> None:
    snap = snapshot(*(node(f"n{i}", "mixed") for i in range(50)))
    v = cluster_verdict(snap, pod(1, nodeSelector={"kubernetes.io/hostname": "n7"}))
    assert v.nodes_fit == ("n7",)
    assert v.reasons == ()


def test_a_gang_needs_every_pod_placed_at_once() -> None:
    from tests.core.fit.builders import gang

    snap = snapshot(
        node("t0", "training"),
        node("t1", "training"),
        node("t2", "training", used=1),
        node("t3", "training"),
    )
    job = gang("PyTorchJob", 3, pool="training", tolerate="workload-training")
    fit = report(snap, job).workloads[0]
    training = fit.pool("training")
    assert training.gang is not None
    assert (training.gang.size, training.gang.placed, training.gang.fits_now) == (4, 3, False)
    assert (training.gang.whole_free_nodes, training.gang.largest_free_block) == (3, 8)
    assert [t.replicas_fit for t in training.templates] == [1, 3]  # each alone fits ...
    assert not training.fits_now  # ... but not together


def test_an_mpi_gang_with_a_cpu_launcher_starts_on_the_gpu_nodes_it_needs() -> None:
    from tests.core.fit.builders import gang

    snap = snapshot(node("t0", "training"), node("t1", "training"), node("t2", "training", used=1))
    job = gang("MPIJob", 2, pool="training", tolerate="workload-training")
    fit = report(snap, job).workloads[0]
    gang_verdict = fit.pool("training").gang
    assert gang_verdict is not None and gang_verdict.fits_now  # the launcher goes to t2
    assert fit.gang is not None and fit.gang.fits_now


def test_pool_verdicts_count_the_pools_nodes() -> None:
    fit = report(demo_like(), pod(8, pool="training")).workloads[0]
    training = fit.pool("training").templates[0]
    assert (
        training.message
        == "0/10 nodes are available: 10 node(s) had untolerated taint {workload-training: true}."
    )
    mixed = fit.pool("mixed").templates[0]
    assert (
        mixed.message
        == "0/15 nodes are available: 15 node(s) didn't match Pod's node affinity/selector."
    )
    assert fit.pool("inference").templates[0].message == "no nodes available to schedule pods"


def test_lands_in_names_every_pool_with_room_and_unpooled_nodes() -> None:
    snap = snapshot(node("m", "mixed"), node("new"), node("t", "training"))
    fit = report(snap, pod(1)).workloads[0]
    assert fit.lands_in == (("", "mixed"),)


def test_extended_resources_are_checked_where_nodes_list_them() -> None:
    rdma = node("rdma", "mixed")
    rdma = type(rdma)(
        **{**rdma.__dict__, "allocatable": Resources(96_000, 1024 * GI, 8, (("rdma/hca", 1),))}
    )
    snap = snapshot(rdma, node("plain", "mixed"))
    v = cluster_verdict(
        snap,
        pod(
            1,
            containers=[
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1, "rdma/hca": 1}}}
            ],
        ),
    )
    assert v.nodes_fit == ("rdma",)
    assert v.reasons == ()
    v = cluster_verdict(
        snap, pod(1, containers=[{"name": "c", "resources": {"limits": {"rdma/hca": 2}}}])
    )
    assert v.reasons == (("Insufficient rdma/hca", 2),)


def test_a_pending_pod_read_from_the_cluster() -> None:
    pending = {
        **pod(2, pool="mixed"),
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
    }
    report_ = check_pod(pending, snapshot(node("m", "mixed")), pool_key=POOL_KEY)
    assert report_.workloads[0].cluster[0].nodes_fit == ("m",)


def test_move_preview_compares_before_and_after() -> None:
    before = snapshot(node("t0", "training", used=8), node("m0", "mixed"))
    pending = {
        **pod(8, pool="training", tolerate="workload-training"),
        "status": {"phase": "Pending"},
    }
    shape = pod_shape(pending)
    assert not evaluate_pod(shape, before).fits
    moved = node("m0", "training")
    after = before.with_nodes([moved])
    assert evaluate_pod(shape, after).nodes_fit == ("m0",)
    assert pool_capacity(before, "training").whole_free_nodes == 0
    assert pool_capacity(after, "training").whole_free_nodes == 1
    assert pool_capacity(after, "mixed").nodes == 0


def test_report_as_dict_is_json_ready() -> None:
    import json

    data = report(demo_like(), pod(8, pool="training")).as_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["workloads"][0]["cluster"][0]["scheduler_message"].startswith("0/25 nodes")
    assert set(data["fixes"]) == {"training", "inference", "mixed"}
