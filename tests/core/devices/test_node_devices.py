"""A node's physical GPUs and its units by kind, read as the GPU operator labels them."""

from __future__ import annotations

from pools.core.devices import (
    MIG,
    SHARED,
    WHOLE,
    devices_from_record,
    devices_record,
    instances_per_gpu,
    node_devices,
    unit_kind,
)

A100 = "NVIDIA-A100-SXM4-80GB"


def test_whole_gpus_are_one_unit_a_gpu_and_keep_no_record() -> None:
    labels = {"nvidia.com/gpu.product": A100, "nvidia.com/gpu.count": "8"}
    devices = node_devices(labels, {"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 3})
    assert (devices.gpus, devices.whole_gpus, devices.whole_allocated) == (8, 8, 3)
    assert devices.is_plain and devices.exporter_devices == 8
    assert devices_record(devices) == {}


def test_single_strategy_mig_counts_gpus_not_instances() -> None:
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/gpu.product": f"{A100}-MIG-1g.10gb",
        "nvidia.com/gpu.count": "56",
        "nvidia.com/gpu.memory": "9728",
    }
    devices = node_devices(labels, {"nvidia.com/gpu": 56}, {"nvidia.com/gpu": 5})
    assert (devices.model, devices.gpus, devices.mig_gpus) == (A100, 8, 8)
    assert devices.memory_mib == 80 * 1024  # the GPU's, not the instance's 9728
    [units] = devices.units
    assert (units.kind.kind, units.kind.profile, units.allocatable, units.free) == (
        MIG,
        "1g.10gb",
        56,
        51,
    )
    assert devices.whole_gpus == 0 and devices.exporter_devices == 56
    assert units.kind.label == "MIG 1g.10gb"
    assert dict(devices.operator)["nvidia.com/mig.config.state"] == "success"


def test_mixed_strategy_mig_keeps_each_profile_apart_and_the_whole_gpus() -> None:
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
    }
    allocatable = {"nvidia.com/gpu": 4, "nvidia.com/mig-3g.40gb": 4, "nvidia.com/mig-1g.10gb": 14}
    devices = node_devices(labels, allocatable, {"nvidia.com/mig-3g.40gb": 1})
    assert (devices.gpus, devices.mig_gpus, devices.whole_gpus) == (8, 4, 4)
    kinds = {u.kind.resource: (u.kind.kind, u.kind.profile, u.allocated) for u in devices.units}
    assert kinds == {
        "nvidia.com/gpu": (WHOLE, "", 0),
        "nvidia.com/mig-1g.10gb": (MIG, "1g.10gb", 0),
        "nvidia.com/mig-3g.40gb": (MIG, "3g.40gb", 1),
    }
    # dcgm-exporter reports the 4 whole GPUs and the 18 instances.
    assert devices.exporter_devices == 4 + 18


def test_time_slicing_replicas_are_not_gpus() -> None:
    labels = {
        "nvidia.com/gpu.product": f"{A100}-SHARED",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
    }
    devices = node_devices(labels, {"nvidia.com/gpu": 32}, {"nvidia.com/gpu": 10})
    [units] = devices.units
    assert (units.kind.kind, units.kind.sharing, units.kind.replicas) == (SHARED, "time-slicing", 4)
    assert (devices.model, devices.gpus, devices.whole_gpus, units.free) == (A100, 8, 0, 22)
    assert units.kind.label == "shared GPU (time-slicing, 4 per GPU)"
    assert devices.exporter_devices == 8  # the exporter reports each GPU once


def test_renamed_shared_gpus_without_a_count_label_are_counted_from_the_replicas() -> None:
    labels = {"nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "mps"}
    devices = node_devices(labels, {"nvidia.com/gpu.shared": 16})
    assert devices.gpus == 8 and devices.units[0].kind.label == "shared GPU (mps, 2 per GPU)"


def test_other_resources_are_not_gpu_units() -> None:
    assert unit_kind("ephemeral-storage", {}) is None
    assert unit_kind("rdma/hca", {}) is None
    assert unit_kind("nvidia.com/mig-2g.20gb", {}).profile == "2g.20gb"  # type: ignore[union-attr]


def test_instances_per_gpu_follow_the_slices_of_the_model() -> None:
    assert [
        instances_per_gpu(p, A100) for p in ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
    ] == [7, 3, 2, 1, 1]
    assert instances_per_gpu("1g.6gb", "NVIDIA-A30") == 4
    assert instances_per_gpu("bogus", A100) == 0


def test_a_record_reads_back_with_what_the_pods_hold_now() -> None:
    labels = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "2"}
    devices = node_devices(labels, {"nvidia.com/mig-1g.10gb": 14})
    back = devices_from_record(
        devices_record(devices),
        gpu_model="",
        gpu_count=2,
        gpu_memory_mib=0,
        gpu_allocatable=0,
        gpu_allocated=0,
        requested={"nvidia.com/mig-1g.10gb": 6},
    )
    assert back.gpus == 2 and back.units[0].allocated == 6 and back.units[0].free == 8
    plain = devices_from_record(
        {},
        gpu_model=A100,
        gpu_count=8,
        gpu_memory_mib=81920,
        gpu_allocatable=8,
        gpu_allocated=2,
        requested={},
    )
    assert plain.whole_gpus == 8 and plain.whole_allocated == 2
