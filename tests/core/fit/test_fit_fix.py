"""The fix: the pool's scheduling block merged into every pod template, nothing twice."""

from __future__ import annotations

import json
from typing import Any

import yaml

from pools.core.fit.fix import merge_scheduling_block, scheduling_fix
from pools.core.fit.workloads import read_manifest
from tests.core.fit.builders import POOL_KEY, POOLS, gang, manifest, node, pod, report, snapshot

TRAINING, INFERENCE, MIXED = POOLS
IN_TRAINING = {"key": POOL_KEY, "operator": "In", "values": ["training"]}
TOLERATION = {
    "key": "workload-training",
    "operator": "Equal",
    "value": "true",
    "effect": "NoSchedule",
}


def required_terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]


def fixed(spec: dict[str, Any], pool: Any = TRAINING) -> tuple[bool, dict[str, Any]]:
    changed = merge_scheduling_block(spec, pool, POOL_KEY)
    return changed, spec


def test_a_bare_pod_gets_required_affinity_and_the_toleration() -> None:
    changed, spec = fixed(pod(8)["spec"])
    assert changed
    assert required_terms(spec) == [{"matchExpressions": [IN_TRAINING]}]
    assert spec["tolerations"] == [TOLERATION]


def test_every_ored_term_gets_the_pool_and_other_requirements_stay() -> None:
    terms = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    _, spec = fixed(pod(1, affinity=affinity)["spec"])
    assert required_terms(spec) == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, IN_TRAINING]},
        {
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
            "matchExpressions": [IN_TRAINING],
        },
    ]


def test_a_term_on_another_pool_is_corrected_in_place() -> None:
    _, spec = fixed(pod(1, pool="inference", tolerate="workload-inference")["spec"])
    assert required_terms(spec) == [{"matchExpressions": [IN_TRAINING]}]
    # The user's other toleration stays; the pool's is added.
    assert [t["key"] for t in spec["tolerations"]] == ["workload-inference", "workload-training"]


def test_nothing_is_added_twice() -> None:
    spec = pod(1, pool="training", tolerate="workload-training")["spec"]
    before = json.loads(json.dumps(spec))
    changed, after = fixed(spec)
    assert not changed and after == before
    # A fix applied twice changes nothing the second time.
    once = fixed(pod(1)["spec"])[1]
    assert not merge_scheduling_block(once, TRAINING, POOL_KEY)


def test_a_broad_toleration_already_covers_the_taint() -> None:
    _, spec = fixed(
        pod(1, tolerations=[{"key": "workload-training", "operator": "Exists"}])["spec"]
    )
    assert spec["tolerations"] == [{"key": "workload-training", "operator": "Exists"}]


def test_a_node_selector_on_the_pool_key_is_kept_and_corrected() -> None:
    _, spec = fixed(pod(1, nodeSelector={POOL_KEY: "inference", "zone": "a"})["spec"])
    assert spec["nodeSelector"] == {POOL_KEY: "training", "zone": "a"}
    assert "affinity" not in spec  # the selector pins the pool already


def test_a_pool_without_taint_needs_no_toleration() -> None:
    _, spec = fixed(pod(1)["spec"], MIXED)
    assert "tolerations" not in spec
    assert required_terms(spec) == [
        {"matchExpressions": [{"key": POOL_KEY, "operator": "In", "values": ["mixed"]}]}
    ]


def test_a_taint_without_value_is_tolerated_with_exists() -> None:
    from pools.core.fit.cluster import FitPool
    from pools.core.taints import Taint

    _, spec = fixed(pod(1)["spec"], FitPool("edge", taint=Taint("dedicated", "", "NoExecute")))
    assert spec["tolerations"] == [
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}
    ]


def test_every_template_of_every_document_is_fixed_and_the_diff_shows_it() -> None:
    submitted = manifest(gang("PyTorchJob", 2), pod(1))
    fix = scheduling_fix(submitted, TRAINING, POOL_KEY)
    assert fix.changed == (
        "document 1: spec.pytorchReplicaSpecs.Master.template.spec",
        "document 1: spec.pytorchReplicaSpecs.Worker.template.spec",
        "document 2: spec",
    )
    documents = list(yaml.safe_load_all(fix.text))
    for spec in (
        documents[0]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"],
        documents[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"],
        documents[1]["spec"],
    ):
        assert required_terms(spec) == [{"matchExpressions": [IN_TRAINING]}]
        assert spec["tolerations"] == [TOLERATION]
    assert fix.diff.startswith("--- submitted\n+++ fixed for pool training\n")
    added = [line[1:].strip() for line in fix.diff.splitlines() if line.startswith("+")]
    assert added.count("- key: workload-training") == 3
    assert added.count("- training") == 3
    # The submitted manifest is untouched.
    assert "tolerations" not in submitted.documents[1]["spec"]


def test_json_stays_json() -> None:
    fix = scheduling_fix(read_manifest(json.dumps(pod(1))), MIXED, POOL_KEY)
    assert json.loads(fix.text)["spec"]["affinity"]
    assert fix.diff.count("\n+") > 5


def test_an_already_placed_manifest_has_an_empty_diff() -> None:
    fix = scheduling_fix(
        manifest(pod(1, pool="training", tolerate="workload-training")), TRAINING, POOL_KEY
    )
    assert (fix.diff, fix.changed) == ("", ())


def test_the_fixed_manifest_lands_in_the_pool() -> None:
    snap = snapshot(node("t0", "training"), node("m0", "mixed"), node("i0", "inference"))
    submitted = pod(8)
    assert report(snap, submitted).workloads[0].lands_in == (("mixed",),)
    fixed_text = report(snap, submitted).fixes["training"].text
    after = report(snap, yaml.safe_load(fixed_text)).workloads[0]
    assert after.lands_in == (("training",),)
    assert after.cluster[0].nodes_fit == ("t0",)
