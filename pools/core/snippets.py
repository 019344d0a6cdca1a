"""The scheduling block a team pastes into its Job or Deployment to land on a pool (pure)."""

from __future__ import annotations

from typing import Any

import yaml

from pools.core.desired import PoolSpec

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"
CLAIM = ""  # the pool's GPUs are DRA devices: the pod makes a claim
CLAIM_TEMPLATE = "gpu"


def scheduling_block(
    pool: PoolSpec,
    *,
    pool_key: str,
    gpu_models: list[str] | None = None,
    gpus: int = 1,
    resource: str = GPU_RESOURCE,
) -> str:
    """Required node affinity on the pool label (and GPU model), the toleration for the
    pool's taint, and what the pod asks for of the pool's GPUs: `resource` (the whole GPU,
    a MIG profile, a shared GPU), or with CLAIM a ResourceClaim from a template. Hard
    affinity, because preferred affinity does not isolate anything."""
    expressions: list[dict[str, Any]] = [{"key": pool_key, "operator": "In", "values": [pool.name]}]
    if gpu_models:
        expressions.append(
            {"key": GPU_PRODUCT_LABEL, "operator": "In", "values": sorted(gpu_models)}
        )
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }
            }
        },
    }
    if pool.taint is not None:
        toleration = {
            "key": pool.taint.key,
            "operator": "Equal",
            "value": pool.taint.value,
            "effect": pool.taint.effect,
        }
        if not pool.taint.value:
            toleration = {"key": pool.taint.key, "operator": "Exists", "effect": pool.taint.effect}
        spec["tolerations"] = [toleration]
    head = (
        "# Pod template spec for pool " + pool.name + " (merge into your Job or "
        "Deployment's spec.template)\n"
    )
    if resource == CLAIM:
        spec["containers"] = [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": CLAIM_TEMPLATE}]
        head += (
            f"# Its GPUs are DRA devices: add a ResourceClaimTemplate named {CLAIM_TEMPLATE} "
            f"asking for {gpus} of DeviceClass gpu.nvidia.com\n"
        )
    else:
        spec["containers"] = [{"name": "main", "resources": {"limits": {resource: gpus}}}]
    return head + yaml.safe_dump({"spec": spec}, sort_keys=False, default_flow_style=False)
