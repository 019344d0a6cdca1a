"""Which label and taint keys a pool may not claim, and why (issue 25, R2)."""

from __future__ import annotations

import pytest

from pools.core.owned_keys import host_name_problem, key_owner, ownership_problems

OWNED = {
    "kubernetes.io/hostname": "the kubelet",
    "kubernetes.io/arch": "the kubelet",
    "topology.kubernetes.io/zone": "Kubernetes",
    "node.kubernetes.io/instance-type": "node lifecycle controller",
    "node-role.kubernetes.io/worker": "kubeadm",
    "feature.node.kubernetes.io/pci-10de.present": "Node Feature Discovery",
    "k8s.io/anything": "Kubernetes",
    "cloud.k8s.io/anything": "Kubernetes",
    "nvidia.com/gpu.product": "GPU Feature Discovery",
    "nvidia.com/gpu.deploy.driver": "the GPU Operator",
    "nvidia.com/mig.config": "MIG manager",
    "nvidia.com/cuda.driver.major": "GPU Feature Discovery",
    "nvidia.com/gfd.timestamp": "GPU Feature Discovery",
    "nvidia.com/device-plugin.config": "the GPU Operator",
    "nvidia.com/vgpu.present": "vGPU",
    "nvidia.com/gpu-driver-upgrade-state": "driver upgrade controller",
}


@pytest.mark.parametrize(("key", "owner"), OWNED.items())
def test_keys_owned_by_another_component_name_their_owner(key: str, owner: str) -> None:
    assert owner in (key_owner(key) or "")


@pytest.mark.parametrize(
    "key",
    [
        "gpu-pool",
        "workload-type",
        "example.com/team",
        "node-restriction.kubernetes.io/gpu-pool",  # the prefix Kubernetes leaves to admins
        "nvidia.com/gpu",  # the resource name, a taint key many clusters set themselves
        "notkubernetes.io/x",
        "kubernetes.io.example.com/x",
    ],
)
def test_a_pool_may_claim_its_own_keys(key: str) -> None:
    assert key_owner(key) is None


@pytest.mark.parametrize(
    "value", ["10.0.3.17", "ip-10-0-3-17", "ip-10-0-3-17.ec2.internal", "gpu-17.dc1.example.com"]
)
def test_host_name_values_are_refused(value: str) -> None:
    assert "looks like a host name" in (host_name_problem(value) or "")


@pytest.mark.parametrize("value", ["training", "535.104.05", "v1.2.3", "a100", "true", ""])
def test_ordinary_values_are_not_host_names(value: str) -> None:
    assert host_name_problem(value) is None


def test_each_refused_key_says_why_by_field() -> None:
    problems = ownership_problems(
        {"kubernetes.io/hostname": "gpu-1.example.com", "team": "ml"},
        "node.kubernetes.io/unschedulable",
    )
    assert problems == {
        "labels": [
            "Label key 'kubernetes.io/hostname' is owned by Kubernetes and the kubelet (the "
            "kubernetes.io namespace is reserved); a pool would remove it from every node it "
            "moves out and fight its owner over it (use your own prefix, or "
            "node-restriction.kubernetes.io/).",
            "Label kubernetes.io/hostname='gpu-1.example.com' looks like a host name; a pool's "
            "labels are set on every node of the pool, so a value naming one host would be "
            "wrong on all the others.",
        ],
        "taint_key": [
            "Taint key 'node.kubernetes.io/unschedulable' is owned by the kubelet and the node "
            "lifecycle controller (node conditions); a pool would remove it from every node it "
            "moves out and fight its owner over it (use your own prefix, or "
            "node-restriction.kubernetes.io/)."
        ],
    }
