"""What the write path keeps from one write to the next (subtrees known to decode to
themselves, managedFields entries already written) answers exactly as working it all out
again: the same stored object, the same warnings, the same refusals."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim import apply
from kubesim.cluster import Cluster
from kubesim.patching import strategic_merge_patch
from kubesim.scenario import generated_scenario
from kubesim.schema import CleanSubtrees, decode
from kubesim.seeding import seed


def a_node() -> dict[str, Any]:
    cluster = Cluster()
    seed(cluster, generated_scenario(4))
    return next(iter(cluster.store.objects["nodes"].values())).obj


NODE = a_node()

label_values = st.one_of(
    st.none(),
    st.sampled_from(["training", "inference", "", "-bad-", "x" * 64]),
    st.integers(0, 3),
)
patches = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {
                "labels": st.dictionaries(
                    st.sampled_from(["gpu-pool", "workload-type", "a/b", "kubernetes.io/os"]),
                    label_values,
                    max_size=3,
                )
            },
            optional={"annotations": st.just({}), "bogus": st.just(1)},
        )
    },
    optional={
        "spec": st.fixed_dictionaries(
            {
                "taints": st.lists(
                    st.fixed_dictionaries(
                        {"key": st.sampled_from(["workload-training", "x"])},
                        optional={
                            "value": st.sampled_from(["true", ""]),
                            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
                            "timeAdded": st.just(None),
                            "extra": st.just(True),
                        },
                    ),
                    max_size=2,
                )
            },
            optional={"unschedulable": st.sampled_from([False, True, "yes"])},
        )
    },
)


@settings(max_examples=150, deadline=None)
@given(st.lists(patches, min_size=1, max_size=6))
def test_known_clean_subtrees_decode_as_a_full_walk(sequence: list[dict[str, Any]]) -> None:
    clean, current = CleanSubtrees(), NODE
    for patch in sequence:
        patched = strategic_merge_patch(current, patch, "Node")
        pristine = copy.deepcopy(patched)
        reused, full = decode("Node", patched, clean=clean), decode("Node", pristine)
        assert reused.obj == full.obj
        assert (reused.unknown, reused.mismatch) == (full.unknown, full.mismatch)
        if full.mismatch is None:
            current = reused.obj  # stored, as the server stores what it decoded


def test_what_a_patch_leaves_is_shared_with_the_stored_object() -> None:
    clean = CleanSubtrees()
    labelled = strategic_merge_patch(NODE, {"metadata": {"labels": {"a": "b"}}}, "Node")
    first = decode("Node", labelled)
    patched = strategic_merge_patch(first.obj, {"metadata": {"labels": {"a": "c"}}}, "Node")
    decoded = decode("Node", patched, clean=clean)
    assert decoded.obj["status"] is NODE["status"]
    assert decoded.obj["metadata"]["managedFields"] is NODE["metadata"]["managedFields"]
    assert decoded.obj["metadata"]["labels"]["a"] == "c"


def test_managed_fields_entries_read_as_written() -> None:
    old = NODE
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["gpu-pool"] = "inference"
    recorded = apply.record_update(old, new, "portal", "2026-11-30T16:00:00Z")
    again = apply.record_update(recorded, recorded, "portal", "2026-11-30T16:00:01Z")
    entries = recorded["metadata"]["managedFields"]
    assert all(a is b for a, b in zip(entries, again["metadata"]["managedFields"], strict=True))
    # An entry kubesim wrote reads as the same owner as its copy, parsed field by field.
    parsed = apply.managers_of({"metadata": {"managedFields": copy.deepcopy(entries)}})
    assert apply.managers_of(recorded) == parsed
    assert [m.encode() for m in parsed] == entries


def test_a_refused_subtree_is_refused_again() -> None:
    clean = CleanSubtrees()
    wrong = strategic_merge_patch(NODE, {"spec": {"unschedulable": "yes"}}, "Node")
    unknown = strategic_merge_patch(NODE, {"spec": {"bogus": 1}}, "Node")
    for _ in range(2):
        assert decode("Node", wrong, clean=clean).mismatch is not None
        assert decode("Node", unknown, clean=clean).unknown == ["spec.bogus"]
