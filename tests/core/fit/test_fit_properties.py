"""Properties of the fit check over random small clusters and pods (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pools.core.fit.check import evaluate_pod
from pools.core.fit.cluster import ClusterSnapshot, FitNode, FitPool, NodePod
from pools.core.fit.fix import merge_scheduling_block
from pools.core.fit.plugins import FilterRun
from pools.core.fit.pods import PodShape
from pools.core.fit.resources import Resources
from pools.core.fit.scheduling import NodePlacement, Requirement, Term, Toleration
from pools.core.fit.workloads import read_objects
from pools.core.taints import Taint
from tests.core.fit.builders import POOL_KEY, POOLS

pool_names = st.sampled_from(["training", "inference", "mixed", ""])
taint_keys = st.sampled_from(["workload-training", "workload-inference", "dedicated"])
taints = st.builds(
    Taint,
    taint_keys,
    st.sampled_from(["", "true"]),
    st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
)
label_values = st.sampled_from(["training", "inference", "mixed", "a", "8", "4"])


@st.composite
def nodes(draw: st.DrawFn, name: str) -> FitNode:
    pool = draw(pool_names)
    labels = {"kubernetes.io/hostname": name, "zone": draw(st.sampled_from(["a", "b"]))}
    if pool:
        labels[POOL_KEY] = pool
    if draw(st.booleans()):
        labels["nvidia.com/gpu.count"] = draw(st.sampled_from(["4", "8"]))
    used = draw(st.lists(st.integers(0, 4), max_size=3))
    return FitNode(
        name,
        pool,
        labels,
        tuple(draw(st.lists(taints, max_size=2, unique_by=lambda t: (t.key, t.effect)))),
        unschedulable=draw(st.booleans()),
        ready=draw(st.booleans()),
        allocatable=Resources(8000, 64 * 2**30, draw(st.sampled_from([0, 4, 8]))),
        max_pods=draw(st.integers(0, 4)),
        pods=tuple(NodePod(Resources(1000, 2**30, g)) for g in used),
    )


clusters = st.integers(1, 12).flatmap(lambda n: st.tuples(*(nodes(f"n{i}") for i in range(n))))
requirements = st.one_of(
    st.builds(
        Requirement,
        st.just(POOL_KEY),
        st.sampled_from(["In", "NotIn"]),
        st.lists(label_values, min_size=1, max_size=2).map(tuple),
    ),
    st.builds(
        Requirement,
        st.sampled_from([POOL_KEY, "zone", "nvidia.com/gpu.count"]),
        st.sampled_from(["Exists", "DoesNotExist"]),
    ),
    st.builds(
        Requirement,
        st.just("nvidia.com/gpu.count"),
        st.sampled_from(["Gt", "Lt"]),
        st.sampled_from([("4",), ("7",)]),
    ),
    st.builds(
        Requirement,
        st.just("kubernetes.io/hostname"),
        st.just("In"),
        st.sampled_from([("n1",), ("n2", "n3")]),
    ),
)
shapes = st.builds(
    PodShape,
    requests=st.builds(
        Resources, st.sampled_from([0, 500, 4000]), st.sampled_from([0, 2**30]), st.integers(0, 8)
    ),
    tolerations=st.lists(
        st.builds(
            Toleration,
            st.one_of(st.just(""), taint_keys),
            st.sampled_from(["Equal", "Exists"]),
            st.sampled_from(["", "true"]),
            st.sampled_from(["", "NoSchedule"]),
        ),
        max_size=2,
    ).map(tuple),
    placement=st.builds(
        NodePlacement,
        st.lists(st.tuples(st.just("zone"), st.sampled_from(["a", "b"])), max_size=1).map(tuple),
        st.one_of(
            st.none(),
            st.lists(
                st.lists(requirements, max_size=3).map(lambda r: Term(tuple(r))), max_size=2
            ).map(tuple),
        ),
    ),
)


@settings(max_examples=150, deadline=None)
@given(clusters, shapes)
def test_grouping_nodes_never_changes_a_node_verdict(
    cluster: tuple[FitNode, ...], shape: PodShape
) -> None:
    snapshot = ClusterSnapshot(cluster, POOLS)
    run = FilterRun(snapshot, shape)
    for i, node in enumerate(cluster):
        alone = FilterRun(ClusterSnapshot([node], POOLS), shape)
        assert run.rejection(i) == alone.rejection(0)


@settings(max_examples=150, deadline=None)
@given(clusters, shapes)
def test_every_node_either_fits_or_is_counted_in_the_reasons(
    cluster: tuple[FitNode, ...], shape: PodShape
) -> None:
    verdict = evaluate_pod(shape, ClusterSnapshot(cluster, POOLS), replicas=3)
    assert verdict.replicas_fit <= min(3, verdict.room)
    if verdict.fits:
        assert verdict.reasons == () and verdict.room >= 1
    else:
        counted = sum(n for _, n in verdict.reasons)
        # NodeResourcesFit reports every shortage of a node, the other filters one reason.
        assert counted >= len(cluster)
        assert verdict.message.startswith(f"0/{len(cluster)} nodes are available: ")


@settings(max_examples=100, deadline=None)
@given(clusters, st.sampled_from(POOLS))
def test_after_the_fix_only_resources_can_keep_a_pod_out_of_its_pool(
    cluster: tuple[FitNode, ...], pool: FitPool
) -> None:
    spec = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": POOL_KEY, "operator": "In", "values": ["elsewhere"]}
                            ]
                        }
                    ]
                }
            }
        },
    }
    merge_scheduling_block(spec, pool, POOL_KEY)
    shape = (
        read_objects([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}])
        .workloads[0]
        .templates[0]
        .shape
    )
    snapshot = ClusterSnapshot(cluster, POOLS)
    pool_nodes = [
        i
        for i in snapshot.pool_nodes(pool.name)
        if not cluster[i].unschedulable
        and cluster[i].ready
        and all(t == pool.taint or t.effect == "PreferNoSchedule" for t in cluster[i].taints)
    ]
    run = FilterRun(snapshot, shape)
    for i in pool_nodes:
        assert run.passes_static(i)
    for i, node in enumerate(cluster):
        if node.pool != pool.name:
            assert not run.passes_static(i)
