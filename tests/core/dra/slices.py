"""ResourceSlices as NVIDIA's DRA driver publishes them, for the pure tests."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.nvidia.com"
GPU_CLASS = {
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": 'device.driver == "gpu.nvidia.com" && '
                    'device.attributes["gpu.nvidia.com"].type == "gpu"'
                }
            }
        ]
    },
}
MIG_CLASS = {
    "metadata": {"name": "mig.nvidia.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": 'device.driver == "gpu.nvidia.com" && '
                    'device.attributes["gpu.nvidia.com"].type == "mig"'
                }
            }
        ]
    },
}


def gpu(index: int, product: str = "NVIDIA H100 80GB HBM3", memory: str = "80Gi") -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": product},
            "architecture": {"string": "Hopper"},
            "driverVersion": {"version": "560.35.3"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "uuid": {"string": f"GPU-{index:08x}"},
            "index": {"int": index},
        },
        "capacity": {"memory": {"value": memory}},
    }


def mig(index: int, parent: int, profile: str = "1g.10gb") -> dict[str, Any]:
    return {
        "name": f"gpu-{parent}-mig-{index}",
        "attributes": {
            "type": {"string": "mig"},
            "productName": {"string": "NVIDIA A100-SXM4-80GB"},
            "profile": {"string": profile},
            "parentUUID": {"string": f"GPU-{parent:08x}"},
            "uuid": {"string": f"MIG-{parent:04x}{index:04x}"},
        },
        "capacity": {"memory": {"value": "10Gi"}},
    }


def node_slice(
    node: str,
    devices: list[dict[str, Any]],
    *,
    generation: int = 1,
    count: int = 1,
    pool: str | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-{DRIVER}-{generation}"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
            "nodeName": node,
            "devices": devices,
        },
    }


def claim(requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None):  # type: ignore[no-untyped-def]
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def exactly(name: str = "gpu", cls: str = "gpu.nvidia.com", **more: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, **more}}
