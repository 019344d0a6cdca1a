"""ResourceSlices to devices: generations, complete pools, and what claims hold."""

from __future__ import annotations

from pools.core.dra.inventory import allocated_devices, read_inventory
from tests.core.dra.slices import gpu, node_slice


def test_only_the_highest_generation_counts():
    old = node_slice("n1", [gpu(0), gpu(1)], generation=1)
    new = node_slice("n1", [gpu(0)], generation=2)
    inventory = read_inventory([old, new])
    assert [d.name for d in inventory.devices_of("n1", {})] == ["gpu-0"]


def test_a_pool_waits_until_every_slice_of_its_generation_is_seen():
    first = node_slice("n1", [gpu(0)], generation=3, count=2)
    inventory = read_inventory([first])
    assert inventory.devices_of("n1", {}) == []
    assert inventory.updating == ("gpu.nvidia.com/n1",)
    second = node_slice("n1", [gpu(1)], generation=3, count=2)
    second["metadata"]["name"] += "-b"
    both = read_inventory([first, second])
    assert sorted(d.name for d in both.devices_of("n1", {})) == ["gpu-0", "gpu-1"]
    assert both.updating == ()


def test_attributes_are_qualified_by_the_driver_and_typed():
    (device,) = read_inventory([node_slice("n1", [gpu(3)])]).devices_of("n1", {})
    assert device.attribute("gpu.nvidia.com/productName") == "NVIDIA H100 80GB HBM3"
    assert device.attribute("gpu.nvidia.com/index") == 3
    assert device.attribute("other.com/index") is None
    assert device.gpu_type == "gpu" and device.node == "n1"


def test_slices_for_all_nodes_or_a_selector_serve_the_nodes_they_name():
    everywhere = {
        "spec": {
            "driver": "net.example.com",
            "pool": {"name": "fabric"},
            "allNodes": True,
            "devices": [{"name": "nic-0"}],
        }
    }
    racked = {
        "spec": {
            "driver": "net.example.com",
            "pool": {"name": "rack-a"},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
                ]
            },
            "devices": [{"name": "switch-0"}],
        }
    }
    inventory = read_inventory([everywhere, racked])
    assert [d.name for d in inventory.devices_of("n1", {"rack": "a"})] == ["nic-0", "switch-0"]
    assert [d.name for d in inventory.devices_of("n2", {"rack": "b"})] == ["nic-0"]


def test_allocated_devices_are_read_from_claim_results():
    claims = [
        {
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "driver": "gpu.nvidia.com",
                                "pool": "n1",
                                "device": "gpu-0",
                                "request": "gpu",
                            }
                        ]
                    }
                }
            }
        },
        {"status": {}},
    ]
    assert allocated_devices(claims) == {("gpu.nvidia.com", "n1", "gpu-0")}


def test_node_units_count_each_kind_and_what_claims_hold():
    from pools.core.dra.inventory import node_units
    from tests.core.dra.slices import mig

    inventory = read_inventory([node_slice("n1", [gpu(0), gpu(1), mig(0, 2), mig(1, 2)])])
    held = frozenset({("gpu.nvidia.com", "n1", "gpu-1"), ("gpu.nvidia.com", "n1", "gpu-2-mig-0")})
    assert node_units(inventory, held) == {
        "n1": [["gpu.nvidia.com", "gpu", "", 2, 1], ["gpu.nvidia.com", "mig", "1g.10gb", 2, 1]]
    }


def test_dra_units_are_their_own_kind_on_a_node_and_never_a_gpu():
    from pools.core.devices import DRA, devices_from_record, layout_of

    devices = devices_from_record(
        {},
        gpu_model="NVIDIA-H100-80GB-HBM3",
        gpu_count=4,
        gpu_memory_mib=81559,
        gpu_allocatable=0,
        gpu_allocated=0,
        requested={},
        dra=[["gpu.nvidia.com", "gpu", "", 4, 1], ["gpu.nvidia.com", "mig", "1g.10gb", 7, 0]],
    )
    assert devices.gpus == 4 and devices.whole_gpus == 0
    assert [(u.kind.kind, u.kind.label, u.allocatable, u.free) for u in devices.units] == [
        (DRA, "DRA GPU (gpu.nvidia.com)", 4, 3),
        (DRA, "DRA MIG 1g.10gb (gpu.nvidia.com)", 7, 7),
    ]
    assert not devices.is_plain
    assert {layout_of(u.kind) for u in devices.units} == {"dra"}
