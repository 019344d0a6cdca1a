"""The pool page's scheduling block asks for what the pool's nodes offer: whole GPUs, a MIG
profile's resource, or, for DRA devices, a claim."""

from __future__ import annotations

import pytest

from pools.core.desired import PoolSpec
from pools.core.snippets import CLAIM, scheduling_block
from pools.fleet.selectors import pool_gpu_resource
from pools.models import Node, Pool
from tests.factories import gpu_node


def test_the_block_asks_for_the_resource_given() -> None:
    block = scheduling_block(
        PoolSpec("mig"), pool_key="gpu-pool", resource="nvidia.com/mig-1g.10gb"
    )
    assert "nvidia.com/mig-1g.10gb: 1" in block and "nvidia.com/gpu:" not in block


def test_a_pool_of_dra_devices_gets_a_claim() -> None:
    block = scheduling_block(PoolSpec("dra"), pool_key="gpu-pool", resource=CLAIM, gpus=2)
    assert "resourceClaimTemplateName: gpu" in block and "limits" not in block
    assert "ResourceClaimTemplate named gpu asking for 2 of DeviceClass gpu.nvidia.com" in block


@pytest.mark.django_db
def test_the_pools_resource_is_what_its_nodes_offer_most_of() -> None:
    pool = Pool.objects.get(name="mixed")
    assert pool_gpu_resource(pool) == "nvidia.com/gpu"  # no node: whole GPUs
    gpu_node("whole-0", "mixed")
    assert pool_gpu_resource(pool) == "nvidia.com/gpu"
    mig = gpu_node("mig-0", "mixed")
    Node.objects.filter(pk=mig.pk).update(
        gpu_allocatable=0,
        devices={
            "model": "NVIDIA-A100-SXM4-80GB",
            "gpus": 8,
            "units": [["mig", "nvidia.com/mig-1g.10gb", "1g.10gb", "", 1, 56]],
        },
    )
    assert pool_gpu_resource(pool) == "nvidia.com/mig-1g.10gb"  # 56 slices against 8 GPUs
    dra = gpu_node("dra-0", "mixed")
    Node.objects.filter(pk=dra.pk).update(
        gpu_allocatable=0, dra_units=[["gpu.nvidia.com", "gpu", "", 64, 0]]
    )
    assert pool_gpu_resource(pool) == CLAIM
