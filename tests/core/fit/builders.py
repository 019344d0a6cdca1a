"""Small clusters and pods for the fit check's tests, written the way an operator reads them."""

from __future__ import annotations

from typing import Any

import yaml

from pools.core.fit.check import check_fit
from pools.core.fit.cluster import ClusterSnapshot, FitNode, FitPool, NodePod
from pools.core.fit.resources import Resources
from pools.core.fit.verdicts import FitReport
from pools.core.fit.workloads import Manifest, read_manifest
from pools.core.taints import Taint

POOL_KEY = "gpu-pool"
GI = 2**30
TRAINING_TAINT = Taint("workload-training", "true")
INFERENCE_TAINT = Taint("workload-inference", "true")
POOLS = (
    FitPool("training", {"workload-type": "training"}, TRAINING_TAINT, ("NVIDIA-A100-SXM4-80GB",)),
    FitPool("inference", {"workload-type": "inference"}, INFERENCE_TAINT),
    FitPool("mixed", {"workload-type": "mixed"}),
)
TAINTS = {"training": (TRAINING_TAINT,), "inference": (INFERENCE_TAINT,), "mixed": ()}


def node(
    name: str,
    pool: str = "",
    *,
    gpus: int = 8,
    used: int = 0,
    cpu: int = 96,
    memory_gi: int = 1024,
    max_pods: int = 110,
    pods: tuple[NodePod, ...] | None = None,
    taints: tuple[Taint, ...] | None = None,
    labels: dict[str, str] | None = None,
    product: str = "NVIDIA-A100-SXM4-80GB",
    **fields: Any,
) -> FitNode:
    node_labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product}
    if pool:
        node_labels[POOL_KEY] = pool
    node_labels.update(labels or {})
    if pods is None:
        pods = (NodePod(Resources(gpu=used), 0, f"ns/{name}-job"),) if used else ()
    return FitNode(
        name,
        pool,
        node_labels,
        TAINTS.get(pool, ()) if taints is None else taints,
        allocatable=Resources(cpu * 1000, memory_gi * GI, gpus),
        max_pods=max_pods,
        pods=pods,
        **fields,
    )


def snapshot(*nodes: FitNode, pools: tuple[FitPool, ...] = POOLS) -> ClusterSnapshot:
    return ClusterSnapshot(nodes, pools)


def pod(
    gpus: int = 1,
    *,
    pool: str | None = None,
    tolerate: str | None = None,
    kind: str = "Pod",
    **spec: Any,
) -> dict[str, Any]:
    """A Pod (or its spec under `kind`) asking for GPUs, pinned to a pool and tolerating a taint."""
    pod_spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "trainer:1",
                "resources": {"limits": {"nvidia.com/gpu": gpus}},
            }
        ]
    }
    if pool:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": POOL_KEY, "operator": "In", "values": [pool]}
                            ]
                        }
                    ]
                }
            }
        }
    if tolerate:
        pod_spec["tolerations"] = [{"key": tolerate, "operator": "Exists", "effect": "NoSchedule"}]
    pod_spec.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": pod_spec,
    }


def manifest(*objects: dict[str, Any]) -> Manifest:
    return read_manifest(yaml.safe_dump_all(objects, sort_keys=False))


def report(snap: ClusterSnapshot, *objects: dict[str, Any], **options: Any) -> FitReport:
    return check_fit(manifest(*objects), snap, pool_key=POOL_KEY, **options)


def gang(kind: str, workers: int, gpus: int = 8, **worker_spec: Any) -> dict[str, Any]:
    """A PyTorchJob (Master + Workers) or MPIJob (CPU launcher + Workers) of 8-GPU pods."""
    worker = {"replicas": workers, "template": {"spec": pod(gpus, **worker_spec)["spec"]}}
    if kind == "MPIJob":
        launcher_spec = {
            **pod(0, **worker_spec)["spec"],
            "containers": [{"name": "l", "image": "mpi"}],
        }
        launcher = {"replicas": 1, "template": {"spec": launcher_spec}}
        specs = {"mpiReplicaSpecs": {"Launcher": launcher, "Worker": worker}}
        api_version = "kubeflow.org/v2beta1"
    else:
        master = {"replicas": 1, "template": {"spec": pod(gpus, **worker_spec)["spec"]}}
        specs = {"pytorchReplicaSpecs": {"Master": master, "Worker": worker}}
        api_version = "kubeflow.org/v1"
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "llm"}, "spec": specs}
