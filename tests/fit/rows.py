"""GpuPod rows for unit-level fit check tests, as the inventory stores them."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from pools.models import GpuPod, Node

_uids = itertools.count(1)

TRAINING_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "gpu-pool", "operator": "In", "values": ["training"]}
                    ]
                }
            ]
        }
    }
}
TOLERATE_TRAINING = [{"key": "workload-training", "operator": "Exists", "effect": "NoSchedule"}]


def gpu_pod(
    name: str,
    namespace: str = "ml-training",
    *,
    gpus: int = 1,
    node: str = "",
    waited: timedelta = timedelta(minutes=5),
    **fields: Any,
) -> GpuPod:
    pool_label = ""
    if node:
        pool_label = Node.objects.get(name=node).labels.get(settings.POOL_LABEL_KEY, "")
    return GpuPod.objects.create(
        uid=f"uid-{next(_uids)}",
        namespace=namespace,
        name=name,
        node_name=node,
        pool_label=pool_label,
        phase=GpuPod.Phase.RUNNING if node else GpuPod.Phase.PENDING,
        gpus=gpus,
        units=fields.pop("units", gpus),
        created_at=timezone.now() - waited,
        **fields,
    )
