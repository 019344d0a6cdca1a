"""NVIDIA's DRA driver, as kubesim plays it: the DeviceClasses its chart installs and the
ResourceSlice its kubelet plugin publishes for each node whose GPUs it serves.

A node group with `gpu.dra: true` gives its GPUs to pods through DRA: its device plugin
advertises no `nvidia.com/gpu`, and one ResourceSlice (`driver: gpu.nvidia.com`, pool named
after the node, generation 1, one slice) lists each GPU as a device the way the driver
names it: attributes `type` (gpu), `productName`, `architecture`, `driverVersion`,
`cudaComputeCapability`, `uuid`, `index`, and the capacity `memory`.

Against a real API server the kubelet publishes them (`kubesim.kubelet`), and the real
scheduler and resourceclaim controller do the rest. kubesim's own API server serves them
for reading, with ResourceClaims and ResourceClaimTemplates (none), and does not allocate:
its scheduler leaves a pod with claims Pending, in the DynamicResources plugin's words for a
cluster without the claims (see `kubesim.scheduling.claims_reason`).
"""

from __future__ import annotations

import hashlib
from typing import Any

DRIVER = "gpu.nvidia.com"
GROUP_VERSION = "resource.k8s.io/v1"
# CUDA compute capability by GPU family (NVIDIA's published table).
COMPUTE = {"ampere": "8.0", "hopper": "9.0", "ada-lovelace": "8.9", "blackwell": "10.0"}


def _class(name: str, device_type: str) -> dict[str, Any]:
    expression = (
        f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "{device_type}"'
    )
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def device_classes() -> list[dict[str, Any]]:
    """The classes NVIDIA's chart installs: whole GPUs and MIG devices."""
    return [_class("gpu.nvidia.com", "gpu"), _class("mig.nvidia.com", "mig")]


def product_name(model: str) -> str:
    """GFD's product label back to the name the driver reports: GFD replaced its spaces with
    dashes (`NVIDIA A100-SXM4-80GB` -> `NVIDIA-A100-SXM4-80GB`); the first one is a space
    in every NVIDIA name."""
    return model.replace("-", " ", 1)


def gpu_uuid(node: str, index: int) -> str:
    digest = hashlib.sha256(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def resource_slice(
    node: str, *, model: str, gpus: int, memory_mib: int, family: str, driver: str
) -> dict[str, Any]:
    version = ".".join([*driver.split("."), "0", "0"][:3])
    cuda = COMPUTE.get(family, "8.0") + ".0"
    devices = [
        {
            "name": f"gpu-{index}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": product_name(model)},
                "architecture": {"string": family.split("-")[0].title()},
                "driverVersion": {"version": version},
                "cudaComputeCapability": {"version": cuda},
                "uuid": {"string": gpu_uuid(node, index)},
                "index": {"int": index},
            },
            "capacity": {"memory": {"value": f"{memory_mib}Mi"}},
        }
        for index in range(gpus)
    ]
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
