"""The scheduling block a team pastes into its Job or Deployment to land on a pool (pure)."""

from __future__ import annotations

from typing import Any

import yaml

from pools.core.desired import PoolSpec

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


def scheduling_block(
    pool: PoolSpec, *, pool_key: str, gpu_models: list[str] | None = None, gpus: int = 1
) -> str:
    """Required node affinity on the pool label (and GPU model), the toleration for the
    pool's taint, and the GPU limit: hard affinity, because preferred affinity does not
    isolate anything."""
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
    spec["containers"] = [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]
    text = yaml.safe_dump({"spec": spec}, sort_keys=False, default_flow_style=False)
    return (
        "# Pod template spec for pool " + pool.name + " (merge into your Job or "
        "Deployment's spec.template)\n" + text
    )
