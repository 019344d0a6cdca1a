"""What the probe-pod drills share (lack of resources, job timeout): the probe pod itself,
with the pool's node selector and toleration, in DRILL_NAMESPACE; where it is; its removal;
and their steps, which differ only in what they check."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import F, Max

from pools.common.cluster_access import pool_label_key
from pools.core.insights.readiness import Check
from pools.drills.steps import DrillSteps
from pools.kube.pods import pod_delete
from pools.models import Drill, Node, Pool

# Over the hold, how long a probe may outlive a failed deletion before it ends itself.
DEADLINE_SLACK_SECONDS = 300
PROBE_IMAGE = "registry.k8s.io/pause:3.10"


def largest_free(pool: Pool) -> int:
    """The most GPUs free on one ready, schedulable node of the pool (0 when it has none)."""
    found = (
        Node.objects.present()
        .filter(pool=pool, ready=True, cordoned=False)
        .aggregate(most=Max(F("gpu_allocatable") - F("gpu_allocated")))["most"]
    )
    return max(0, found or 0)


def probe(drill: Drill, gpus: int) -> dict[str, Any]:
    """The probe pod: the pool's selector and toleration, `gpus` GPUs, and a deadline past
    the drill's end, so a probe whose deletion failed ends by itself."""
    pool = drill.pool
    tolerations = []
    if pool.taint_key:
        tolerations.append({"key": pool.taint_key, "operator": "Exists"})
    quantity = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": drill.node_name,
            "namespace": settings.DRILL_NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "gpu-pool-portal", "drill": str(drill.pk)},
        },
        "spec": {
            "nodeSelector": {pool_label_key(): pool.name},
            "tolerations": tolerations,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "activeDeadlineSeconds": drill.hold_seconds + DEADLINE_SLACK_SECONDS,
            "containers": [
                {
                    "name": "probe",
                    "image": PROBE_IMAGE,
                    "resources": {"requests": quantity, "limits": quantity},
                }
            ],
        },
    }


def namespace_of(drill: Drill) -> str:
    """Where the drill made its probe (the setting may have changed since)."""
    return str(drill.observed.get("namespace", settings.DRILL_NAMESPACE))


def pod_of(drill: Drill) -> str:
    return f"{namespace_of(drill)}/{drill.node_name}"


def remove(drill: Drill, now: datetime) -> bool:
    pod_delete(namespace_of(drill), drill.node_name)
    return True


def probe_steps(
    *,
    validate: Callable[[Pool, str, int], dict[str, str]],
    begin: Callable[[Drill, datetime], dict[str, Any]],
    observe: Callable[[Drill, datetime], Any],
    record: Callable[[Drill, Any, bool], tuple[dict[str, Any], list[Check]]],
    name: Callable[[int], str],
) -> DrillSteps:
    return DrillSteps(
        validate,
        begin,
        observe,
        remove,
        record,
        begun="drill.probe_created",
        node_given=False,
        own_name=name,
    )
