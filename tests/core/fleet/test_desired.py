"""The pure core: desired state, diff, drift and the patch body."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pools.core.desired import (
    NodeState,
    PoolSpec,
    desired_state,
    drift,
    managed_label_keys,
    managed_taint_keys,
    node_diff,
    node_patch,
)
from pools.core.taints import Taint

KEY = "gpu-pool"
TRAINING = PoolSpec(
    "training",
    {"workload-type": "training", "batch-scheduling": "enabled"},
    Taint("workload-training", "true", "NoSchedule"),
)
INFERENCE = PoolSpec(
    "inference", {"workload-type": "inference"}, Taint("workload-inference", "true", "NoSchedule")
)
MIXED = PoolSpec("mixed", {"workload-type": "mixed"})
POOLS = [TRAINING, INFERENCE, MIXED]
GFD = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "kubernetes.io/hostname": "n1"}
NOT_READY = Taint("node.kubernetes.io/not-ready", "", "NoExecute")


def training_node() -> NodeState:
    return NodeState(
        {
            **GFD,
            KEY: "training",
            "workload-type": "training",
            "batch-scheduling": "enabled",
            "team": "vision",
        },
        (TRAINING.taint, NOT_READY),
    )  # type: ignore[arg-type]


def test_training_to_inference_changes_exactly_the_managed_keys() -> None:
    node = training_node()
    desired = desired_state(node.labels, node.taints, INFERENCE, POOLS, pool_key=KEY)
    assert desired.labels == {
        **GFD,
        KEY: "inference",
        "workload-type": "inference",
        "team": "vision",
    }
    # The old pool's taint goes (left on, it keeps the new pool's pods off), others stay.
    assert desired.taints == (NOT_READY, INFERENCE.taint)
    diff = node_diff(node, desired)
    assert diff.labels_changed == {
        KEY: ("training", "inference"),
        "workload-type": ("training", "inference"),
    }
    assert diff.labels_removed == {"batch-scheduling": "enabled"}
    assert diff.labels_added == {}
    assert diff.taints_added == (INFERENCE.taint,)
    assert diff.taints_removed == (TRAINING.taint,)
    assert diff.summary() == (
        "~gpu-pool=inference (was training), ~workload-type=inference (was training), "
        "-batch-scheduling, +taint workload-inference=true:NoSchedule, "
        "-taint workload-training=true:NoSchedule"
    )


def test_moving_to_a_pool_without_taint_removes_the_old_one() -> None:
    node = training_node()
    desired = desired_state(node.labels, node.taints, MIXED, POOLS, pool_key=KEY)
    assert desired.taints == (NOT_READY,)


def test_no_change_is_an_empty_diff() -> None:
    node = training_node()
    desired = desired_state(node.labels, node.taints, TRAINING, POOLS, pool_key=KEY)
    diff = node_diff(node, desired)
    assert diff.is_empty
    assert diff.summary() == "no change"


def test_unassigning_removes_every_managed_key() -> None:
    node = training_node()
    desired = desired_state(node.labels, node.taints, None, POOLS, pool_key=KEY)
    assert desired.labels == {**GFD, "team": "vision"}
    assert desired.taints == (NOT_READY,)


def test_a_hand_set_variant_of_a_managed_taint_is_replaced() -> None:
    node = NodeState(
        {KEY: "training", "workload-type": "training", "batch-scheduling": "enabled"},
        (Taint("workload-training", "yes", "NoExecute"),),
    )
    change = drift(node.labels, node.taints, POOLS, pool_key=KEY)
    assert change is not None
    assert change.taints_removed == (Taint("workload-training", "yes", "NoExecute"),)
    assert change.taints_added == (TRAINING.taint,)


def test_drift_names_what_is_missing() -> None:
    missing_taint = NodeState(
        {KEY: "training", "workload-type": "training", "batch-scheduling": "enabled"}, ()
    )
    change = drift(missing_taint.labels, missing_taint.taints, POOLS, pool_key=KEY)
    assert change is not None and change.taints_added == (TRAINING.taint,)
    node = training_node()
    assert drift(node.labels, node.taints, POOLS, pool_key=KEY) is None
    assert drift(GFD, (), POOLS, pool_key=KEY) is None  # unassigned is not drifted


def test_patch_body_deletes_with_null_and_sends_the_whole_taint_list() -> None:
    node = training_node()
    desired = desired_state(node.labels, node.taints, INFERENCE, POOLS, pool_key=KEY)
    body = node_patch(node_diff(node, desired), desired, "42")
    assert body == {
        "metadata": {
            "resourceVersion": "42",
            "labels": {KEY: "inference", "workload-type": "inference", "batch-scheduling": None},
        },
        "spec": {
            "taints": [
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
                {"key": "workload-inference", "value": "true", "effect": "NoSchedule"},
            ]
        },
    }


def test_a_system_taint_goes_back_with_its_time_added() -> None:
    raw = {
        "key": "node.kubernetes.io/not-ready",
        "effect": "NoExecute",
        "timeAdded": "2026-01-02T03:04:05Z",
    }
    seen = Taint.from_api(raw)
    # The time is not part of what a taint is: a diff ignores it, a PATCH sends it back.
    assert seen == NOT_READY and {seen} == {NOT_READY}
    node = NodeState({KEY: "training"}, (seen,))
    desired = desired_state(node.labels, node.taints, INFERENCE, POOLS, pool_key=KEY)
    assert node_patch(node_diff(node, desired), desired, "1")["spec"]["taints"][0] == raw


def test_label_only_change_leaves_taints_out_of_the_patch() -> None:
    node = NodeState({KEY: "mixed"}, ())
    desired = desired_state(node.labels, node.taints, MIXED, POOLS, pool_key=KEY)
    body = node_patch(node_diff(node, desired), desired, "7")
    assert body == {"metadata": {"resourceVersion": "7", "labels": {"workload-type": "mixed"}}}


def test_the_pool_key_is_a_setting() -> None:
    node = NodeState({"cloud.google.com/gke-nodepool": "training"}, ())
    desired = desired_state(
        node.labels, node.taints, INFERENCE, POOLS, pool_key="cloud.google.com/gke-nodepool"
    )
    assert desired.labels["cloud.google.com/gke-nodepool"] == "inference"
    assert "gpu-pool" not in desired.labels


# --- properties over random nodes and pool sets ---

names = st.sampled_from(["a", "b", "c", "team", "zone", "workload-type", "x.io/y"])
values = st.sampled_from(["", "1", "true", "training", "inference", "v"])
effects = st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])
taints = st.builds(Taint, names, values, effects)


@st.composite
def pool_sets(draw: st.DrawFn) -> list[PoolSpec]:
    pool_names = draw(
        st.lists(st.sampled_from(["p1", "p2", "p3", "p4"]), min_size=1, max_size=4, unique=True)
    )
    taint_keys = iter(draw(st.lists(names, min_size=4, max_size=4, unique=True)))
    return [
        PoolSpec(
            name,
            draw(st.dictionaries(names, values, max_size=3)),
            Taint(next(taint_keys), "true", draw(effects)) if draw(st.booleans()) else None,
        )
        for name in pool_names
    ]


labels_strategy = st.dictionaries(st.one_of(names, st.just(KEY)), values, max_size=6)


@given(labels_strategy, st.lists(taints, max_size=4), pool_sets(), st.data())
def test_desired_state_is_idempotent(labels, node_taints, pools, data) -> None:  # type: ignore[no-untyped-def]
    target = data.draw(st.sampled_from([*pools, None]))
    once = desired_state(labels, node_taints, target, pools, pool_key=KEY)
    twice = desired_state(once.labels, once.taints, target, pools, pool_key=KEY)
    assert once == twice
    assert node_diff(once, twice).is_empty


@given(labels_strategy, st.lists(taints, max_size=4), pool_sets(), st.data())
def test_unmanaged_keys_never_change(labels, node_taints, pools, data) -> None:  # type: ignore[no-untyped-def]
    target = data.draw(st.sampled_from(pools))
    result = desired_state(labels, node_taints, target, pools, pool_key=KEY)
    label_keys = managed_label_keys(pools, KEY)
    taint_keys = managed_taint_keys(pools)
    assert {k: v for k, v in labels.items() if k not in label_keys} == {
        k: v for k, v in result.labels.items() if k not in label_keys
    }
    assert [t for t in node_taints if t.key not in taint_keys] == [
        t for t in result.taints if t.key not in taint_keys
    ]


@given(labels_strategy, st.lists(taints, max_size=4), pool_sets(), st.data())
def test_the_result_carries_exactly_one_pools_managed_labels_and_taint(
    labels, node_taints, pools, data
) -> None:  # type: ignore[no-untyped-def]
    target = data.draw(st.sampled_from(pools))
    result = desired_state(labels, node_taints, target, pools, pool_key=KEY)
    label_keys = managed_label_keys(pools, KEY)
    assert {k: v for k, v in result.labels.items() if k in label_keys} == {
        **target.labels,
        KEY: target.name,
    }
    managed = [t for t in result.taints if t.key in managed_taint_keys(pools)]
    assert managed == ([target.taint] if target.taint else [])
    assert drift(result.labels, result.taints, pools, pool_key=KEY) is None
