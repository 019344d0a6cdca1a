"""The fit check on pods with ResourceClaims: the DynamicResources plugin's PreFilter and
Filter, in its words, and how many pods the devices take."""

from __future__ import annotations

from typing import Any

from pools.core.fit.check import check_fit
from pools.core.fit.claims import dra_state
from pools.core.fit.cluster import ClusterSnapshot
from pools.core.fit.workloads import read_objects
from tests.core.dra.slices import GPU_CLASS, MIG_CLASS, claim, exactly, gpu, mig, node_slice
from tests.core.fit.builders import POOL_KEY, POOLS, node

NODES = (node("h0", "mixed", gpus=0), node("h1", "mixed", gpus=0), node("plain", "mixed"))
SLICES = [node_slice("h0", [gpu(0), gpu(1)]), node_slice("h1", [gpu(0), mig(0, 1), mig(1, 1)])]


def cluster(slices=SLICES, claims=(), templates=(), classes=(GPU_CLASS, MIG_CLASS)):  # type: ignore[no-untyped-def]
    return ClusterSnapshot(NODES, POOLS, dra_state(slices, classes, claims, templates))


def template(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": spec},
    }


def workload(
    claims: list[dict[str, Any]], *, replicas: int = 0, kind: str = "Pod"
) -> dict[str, Any]:
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"claims": [{"name": c["name"]} for c in claims]},
            }
        ],
        "resourceClaims": claims,
    }
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"}, "spec": spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve"},
        "spec": {"replicas": replicas, "template": {"spec": spec}},
    }


def verdict(snap: ClusterSnapshot, *documents: dict[str, Any]):  # type: ignore[no-untyped-def]
    report = check_fit(read_objects(list(documents)), snap, pool_key=POOL_KEY, with_fixes=False)
    [fit] = report.workloads
    return fit


ONE_GPU = template("one-gpu", claim([exactly()]))
BY_TEMPLATE = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]


def test_a_claim_for_a_gpu_lands_on_the_nodes_that_publish_one() -> None:
    fit = verdict(cluster(), ONE_GPU, workload(BY_TEMPLATE))
    assert fit.fits_now
    assert list(fit.cluster[0].nodes_fit) == ["h0", "h1"]


def test_each_pod_of_a_template_claim_takes_its_own_device() -> None:
    fit = verdict(cluster(), ONE_GPU, workload(BY_TEMPLATE, replicas=4, kind="Deployment"))
    assert fit.cluster[0].room == 3  # two GPUs on h0, one on h1
    assert not fit.fits_now and fit.cluster[0].replicas_fit == 3


def test_a_template_from_the_cluster_is_used_when_the_manifest_has_none() -> None:
    fit = verdict(cluster(templates=[ONE_GPU]), workload(BY_TEMPLATE))
    assert fit.fits_now


def test_a_count_no_node_has_is_cannot_allocate_all_claims() -> None:
    fit = verdict(
        cluster(),
        template("four", claim([exactly(count=4)])),
        workload([{"name": "gpu", "resourceClaimTemplateName": "four"}]),
    )
    [v] = fit.cluster
    assert not fit.fits_now
    # The plain node has no DRA device either.
    assert v.message == "0/3 nodes are available: 3 cannot allocate all claims."
    assert (
        v.preemption
        == "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_a_class_that_does_not_exist_fails_every_node_at_prefilter() -> None:
    missing = template("tpu", claim([exactly(cls="tpu.example.com")]))
    fit = verdict(
        cluster(), missing, workload([{"name": "gpu", "resourceClaimTemplateName": "tpu"}])
    )
    [v] = fit.cluster
    assert (
        v.message
        == "0/3 nodes are available: request gpu: device class tpu.example.com does not exist."
    )
    assert v.room == 0


def test_a_shared_claim_that_does_not_exist_and_a_missing_template_are_named() -> None:
    [v] = verdict(cluster(), workload([{"name": "gpu", "resourceClaimName": "shared"}])).cluster
    assert v.message == '0/3 nodes are available: resourceclaim.resource.k8s.io "shared" not found.'
    [w] = verdict(
        cluster(), workload([{"name": "gpu", "resourceClaimTemplateName": "nope"}])
    ).cluster
    assert (
        w.message
        == '0/3 nodes are available: pod "default/trainer": ResourceClaim not created yet.'
    )


def test_devices_other_claims_hold_are_not_free() -> None:
    held = {
        "metadata": {"name": "held", "namespace": "default"},
        "spec": claim([exactly(count=2)]),
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "driver": "gpu.nvidia.com",
                            "pool": "h0",
                            "device": "gpu-0",
                            "request": "gpu",
                        },
                        {
                            "driver": "gpu.nvidia.com",
                            "pool": "h0",
                            "device": "gpu-1",
                            "request": "gpu",
                        },
                    ]
                }
            }
        },
    }
    fit = verdict(cluster(claims=[held]), ONE_GPU, workload(BY_TEMPLATE))
    assert list(fit.cluster[0].nodes_fit) == ["h1"]


def test_an_allocated_shared_claim_binds_the_pod_to_its_node() -> None:
    allocated = {
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": claim([exactly()]),
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "driver": "gpu.nvidia.com",
                            "pool": "h1",
                            "device": "gpu-0",
                            "request": "gpu",
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["h1"]}
                            ]
                        }
                    ]
                },
            }
        },
    }
    fit = verdict(
        cluster(claims=[allocated]), workload([{"name": "gpu", "resourceClaimName": "shared"}])
    )
    assert list(fit.cluster[0].nodes_fit) == ["h1"]


def test_mig_devices_through_first_available() -> None:
    request = {
        "name": "accel",
        "firstAvailable": [
            {"name": "whole", "deviceClassName": "gpu.nvidia.com", "count": 2},
            {"name": "slices", "deviceClassName": "mig.nvidia.com", "count": 2},
        ],
    }
    fit = verdict(
        cluster(),
        template("either", claim([request])),
        workload([{"name": "accel", "resourceClaimTemplateName": "either"}]),
    )
    assert list(fit.cluster[0].nodes_fit) == ["h0", "h1"]


def test_a_manifest_claim_with_a_bad_field_is_refused_naming_it() -> None:
    import pytest

    from pools.core.fit.findings import ManifestError

    bad = template("bad", claim([exactly(count=0)]))
    with pytest.raises(ManifestError) as caught:
        read_objects([bad, workload([{"name": "gpu", "resourceClaimTemplateName": "bad"}])])
    [problem] = caught.value.problems
    assert problem.problem.path == "spec.spec.devices.requests[0].exactly.count"


def test_a_fix_is_offered_only_for_pools_whose_devices_could_take_the_claims() -> None:
    nodes = (
        node("h0", "training", gpus=0),
        node("h1", "training", gpus=0),
        node("plain", "mixed"),
        node("plain2", "inference"),
    )
    snap = ClusterSnapshot(nodes, POOLS, dra_state(SLICES, (GPU_CLASS, MIG_CLASS), (), ()))
    report = check_fit(read_objects([ONE_GPU, workload(BY_TEMPLATE)]), snap, pool_key=POOL_KEY)
    # Only training has nodes that publish a GPU; the fix there is a diff of the pod's
    # scheduling block, the claim untouched.
    assert sorted(report.fixes) == ["training"]
    assert report.no_fix == {
        "inference": "no node here has DRA devices that could take its claims",
        "mixed": "no node here has DRA devices that could take its claims",
    }
    diff = report.fixes["training"].diff
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+ ")]
    assert "- key: gpu-pool" in added and "- key: workload-training" in added
    assert not any("resourceClaim" in line for line in diff.splitlines() if line[:1] in "+-")
