"""Every resource a pod asks for is counted, as NodeResourcesFit counts it: a MIG profile,
a shared GPU or any other extended resource no node offers leaves the pod unplaced."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pools.core.fit.resources import Resources
from tests.core.fit.builders import GI, node, pod, report, snapshot


def asking(resources: dict[str, int]) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": resources}}]}
    return pod(0, pool="mixed", **spec)


def mig_node(name: str, profile: str, count: int) -> Any:
    return replace(
        node(name, "mixed", gpus=0),
        allocatable=Resources(96_000, 1024 * GI, 0, ((f"nvidia.com/mig-{profile}", count),)),
    )


def test_a_profile_no_node_offers_is_insufficient_everywhere() -> None:
    snap = snapshot(mig_node("m0", "1g.10gb", 14), node("m1", "mixed"))
    [fit] = report(snap, asking({"nvidia.com/mig-4g.71gb": 1})).workloads
    assert not fit.fits_now
    [verdict] = fit.cluster
    assert verdict.message == "0/2 nodes are available: 2 Insufficient nvidia.com/mig-4g.71gb."
    # More of it would not appear by evicting pods.
    assert "Preemption is not helpful" in verdict.preemption


def test_a_profile_one_node_offers_lands_there_until_it_is_taken() -> None:
    snap = snapshot(mig_node("m0", "1g.10gb", 2), node("m1", "mixed"))
    [fit] = report(snap, asking({"nvidia.com/mig-1g.10gb": 1})).workloads
    assert fit.fits_now and list(fit.cluster[0].nodes_fit) == ["m0"]
    assert fit.cluster[0].room == 2
    [three] = report(snap, {**asking({"nvidia.com/mig-1g.10gb": 3})}).workloads
    assert not three.fits_now


def test_what_pods_on_the_node_hold_of_a_resource_is_not_free() -> None:
    from pools.core.fit.cluster import NodePod

    held = NodePod(Resources(extended=(("nvidia.com/gpu.shared", 15),)), 0, "ns/a")
    shared = replace(
        node("s0", "mixed", gpus=0, pods=(held,)),
        allocatable=Resources(96_000, 1024 * GI, 0, (("nvidia.com/gpu.shared", 16),)),
    )
    [one] = report(snapshot(shared), asking({"nvidia.com/gpu.shared": 1})).workloads
    [two] = report(snapshot(shared), asking({"nvidia.com/gpu.shared": 2})).workloads
    assert one.fits_now and not two.fits_now
    assert (
        two.cluster[0].message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.shared."
    )
