"""The allocator against the behaviour of Kubernetes' structured allocator."""

from __future__ import annotations

import pytest

from pools.core.dra.allocate import AllocationError, Allocator
from pools.core.dra.claims import class_selectors, read_claim_spec
from pools.core.dra.inventory import read_inventory
from pools.core.fit.fields import FieldReader
from tests.core.dra.slices import GPU_CLASS, MIG_CLASS, claim, exactly, gpu, mig, node_slice

CLASSES = {c["metadata"]["name"]: class_selectors(c) for c in (GPU_CLASS, MIG_CLASS)}


def spec(raw):  # type: ignore[no-untyped-def]
    reader = FieldReader()
    found = read_claim_spec(reader, raw, "spec")
    assert reader.problems == []
    return found


def devices(*items):  # type: ignore[no-untyped-def]
    return list(read_inventory([node_slice("n1", list(items))]).devices_of("n1", {}))


def names(result):  # type: ignore[no-untyped-def]
    return [sorted(d[2] for d in per_claim) for per_claim in result]


def test_one_gpu_is_the_first_that_fits():
    result = Allocator(CLASSES).allocate([spec(claim([exactly()]))], devices(gpu(0), gpu(1)))
    assert names(result) == [["gpu-0"]]


def test_a_count_larger_than_the_node_has_does_not_fit():
    wanted = spec(claim([exactly(count=3)]))
    assert Allocator(CLASSES).allocate([wanted], devices(gpu(0), gpu(1))) is None


def test_held_devices_are_not_allocated_again():
    found = devices(gpu(0), gpu(1))
    held = {found[0].id}
    result = Allocator(CLASSES).allocate([spec(claim([exactly()]))], found, held)
    assert names(result) == [["gpu-1"]]
    assert Allocator(CLASSES).allocate([spec(claim([exactly(count=2)]))], found, held) is None


def test_the_class_selector_keeps_mig_devices_out_of_a_gpu_request():
    found = devices(mig(0, 0), mig(1, 0))
    assert Allocator(CLASSES).allocate([spec(claim([exactly()]))], found) is None
    assert names(
        Allocator(CLASSES).allocate([spec(claim([exactly(cls="mig.nvidia.com")]))], found)
    ) == [["gpu-0-mig-0"]]


def test_request_selectors_read_quantities_and_versions():
    found = devices(gpu(0, memory="40Gi"), gpu(1, memory="80Gi"))
    big = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("64Gi")) >= 0'
    newer = 'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))'
    selectors = [{"cel": {"expression": big}}, {"cel": {"expression": newer}}]
    result = Allocator(CLASSES).allocate([spec(claim([exactly(selectors=selectors)]))], found)
    assert names(result) == [["gpu-1"]]
    older = 'device.attributes["gpu.nvidia.com"].driverVersion.isLessThan(semver("560.35.3"))'
    none = [{"cel": {"expression": older}}]
    assert Allocator(CLASSES).allocate([spec(claim([exactly(selectors=none)]))], found) is None


def test_all_takes_every_matching_device_and_fails_when_one_is_held():
    found = devices(gpu(0), gpu(1), mig(0, 2))
    everything = spec(claim([exactly(allocationMode="All")]))
    assert names(Allocator(CLASSES).allocate([everything], found)) == [["gpu-0", "gpu-1"]]
    assert Allocator(CLASSES).allocate([everything], found, {found[1].id}) is None
    assert Allocator(CLASSES).allocate([everything], devices(mig(0, 0))) is None


def test_match_attribute_keeps_the_devices_of_one_model_together():
    found = devices(gpu(0, "NVIDIA A100"), gpu(1, "NVIDIA H100"), gpu(2, "NVIDIA H100"))
    same = [{"matchAttribute": "gpu.nvidia.com/productName"}]
    result = Allocator(CLASSES).allocate([spec(claim([exactly(count=2)], same))], found)
    assert names(result) == [["gpu-1", "gpu-2"]]
    three = spec(claim([exactly(count=3)], same))
    assert Allocator(CLASSES).allocate([three], found) is None


def test_match_attribute_on_an_attribute_a_device_lacks_refuses_it():
    found = devices(gpu(0), gpu(1))
    missing = [{"matchAttribute": "gpu.nvidia.com/profile"}]
    assert Allocator(CLASSES).allocate([spec(claim([exactly()], missing))], found) is None


def test_first_available_takes_the_first_alternative_that_fits():
    found = devices(gpu(0), mig(0, 1), mig(1, 1))
    request = {
        "name": "accel",
        "firstAvailable": [
            {"name": "two-gpus", "deviceClassName": "gpu.nvidia.com", "count": 2},
            {"name": "slices", "deviceClassName": "mig.nvidia.com", "count": 2},
        ],
    }
    result = Allocator(CLASSES).allocate([spec(claim([request]))], found)
    assert names(result) == [["gpu-1-mig-0", "gpu-1-mig-1"]]


def test_two_claims_of_one_pod_backtrack_onto_other_devices():
    # The first claim may take any GPU; the second needs gpu-0's product. A greedy pick of
    # gpu-0 for the first would starve the second: the search moves the first to gpu-1.
    found = devices(gpu(0, "NVIDIA A100"), gpu(1, "NVIDIA H100"))
    a100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100"'
    first = spec(claim([exactly()]))
    second = spec(claim([exactly(selectors=[{"cel": {"expression": a100}}])]))
    assert names(Allocator(CLASSES).allocate([first, second], found)) == [["gpu-1"], ["gpu-0"]]


def test_a_selector_failing_on_a_device_is_an_error_naming_it():
    broken = 'device.attributes["gpu.nvidia.com"].nonexistent == "x"'
    wanted = spec(claim([exactly(selectors=[{"cel": {"expression": broken}}])]))
    with pytest.raises(
        AllocationError, match=r"request gpu: selector #0 on device .*gpu-0.*no such key"
    ):
        Allocator(CLASSES).allocate([wanted], devices(gpu(0)))


def test_a_class_nobody_defined_matches_every_device_of_the_request_only_through_its_class():
    # The allocator is given the classes that exist; the missing class is found before
    # (PreFilter: "device class ... does not exist"), so here no selector means any device.
    result = Allocator({"any": ()}).allocate(
        [spec(claim([exactly(cls="any")]))], devices(mig(0, 0))
    )
    assert names(result) == [["gpu-0-mig-0"]]
