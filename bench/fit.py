"""The fit check on a 1,000-node and a 5,000-node pool (pure Python, no server).

.venv/bin/python -m bench.fit [--pools 1000 5000] [--runs 15]

The cluster has the share of kubesim's generated scenario: the training pool under test is
40 % of the nodes, inference 30 %, mixed 20 %, 10 % in no pool; 8 A100s a node, 0-8 of them
held by one-GPU pods. Each figure is the median over the runs:

- `api objects -> nodes`: Node and Pod objects (as the API returns them) to `FitNode`s,
- `snapshot`: adding up each node's requests and grouping nodes (once per request, cacheable),
- `check_fit(...)`: reading the manifest, every pool's verdict, advice and one fix per pool,
- `evaluate_pod`: one pod shape over every node (the Pending list and move preview path).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench.common import ms, timed
from pools.core.fit.api_objects import fit_nodes
from pools.core.fit.check import check_fit, evaluate_pod
from pools.core.fit.cluster import ClusterSnapshot, FitPool
from pools.core.fit.workloads import read_manifest
from pools.core.taints import Taint

POOL_KEY = "gpu-pool"
POOLS = [
    FitPool("training", {}, Taint("workload-training", "true"), ("NVIDIA-A100-SXM4-80GB",)),
    FitPool("inference", {}, Taint("workload-inference", "true")),
    FitPool("mixed"),
]
SHARES = (("training", 0.4), ("inference", 0.3), ("mixed", 0.2), ("", 0.1))


def api_objects(training_nodes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    total = round(training_nodes / SHARES[0][1])
    nodes, pods = [], []
    start = 0
    for pool, share in SHARES:
        count = round(total * share)
        for index in range(start, start + count):
            nodes.append(_node(f"gpu-{pool or 'new'}-{index:05d}", pool))
            pods += [_pod(nodes[-1]["metadata"]["name"], n) for n in range(index % 9)]
        start += count
    return nodes, pods


def _node(name: str, pool: str) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    taints = []
    if pool:
        labels[POOL_KEY] = pool
    if pool in ("training", "inference"):
        taints.append({"key": f"workload-{pool}", "value": "true", "effect": "NoSchedule"})
    allocatable = {"cpu": "96", "memory": "1056Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(node: str, number: int) -> dict[str, Any]:
    container = {
        "name": "main",
        "resources": {
            "limits": {"nvidia.com/gpu": "1"},
            "requests": {"cpu": "4", "memory": "32Gi"},
        },
    }
    return {
        "metadata": {"name": f"{node}-{number}", "namespace": "team"},
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"phase": "Running"},
    }


MANIFEST = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: llm-pretrain}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec: &worker
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                - matchExpressions: [{key: gpu-pool, operator: In, values: [training]}]
          tolerations: [{key: workload-training, operator: Exists, effect: NoSchedule}]
          containers:
          - name: pytorch
            image: trainer:1
            resources:
              limits: {nvidia.com/gpu: 8, cpu: "32", memory: 256Gi}
    Worker:
      replicas: 63
      template:
        spec: *worker
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: chat}
spec:
  replicas: 40
  template:
    spec:
      containers:
      - name: serve
        image: chat:1
        resources: {limits: {nvidia.com/gpu: 2}}
"""


def measure(size: int, runs: int) -> str:
    nodes, pods = api_objects(size)
    fitted = fit_nodes(nodes, pods, pool_key=POOL_KEY)
    snapshot = ClusterSnapshot(fitted, POOLS)
    assert len(snapshot.pool_nodes("training")) == size
    manifest = read_manifest(MANIFEST)
    shape = manifest.workloads[0].templates[1].shape
    convert = timed(max(3, runs // 5), lambda: fit_nodes(nodes, pods, pool_key=POOL_KEY))
    build = timed(runs, lambda: ClusterSnapshot(fitted, POOLS))
    check = timed(runs, lambda: check_fit(read_manifest(MANIFEST), snapshot, pool_key=POOL_KEY))
    one = timed(runs, lambda: evaluate_pod(shape, snapshot))
    gang = check_fit(manifest, snapshot, pool_key=POOL_KEY).workloads[0].pool("training").gang
    assert gang is not None
    return (
        f"  training pool of {size} nodes ({len(nodes)} nodes, {len(pods)} pods in all): "
        f"api objects -> nodes {ms(statistics.median(convert))}, "
        f"snapshot {ms(statistics.median(build))}, "
        f"check_fit {ms(statistics.median(check))}, "
        f"evaluate_pod {ms(statistics.median(one))}; "
        f"the {gang.size}-pod gang fits now: {gang.fits_now}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pools", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(
        f"fit check, median of {args.runs} runs; manifest: PyTorchJob 1+63 x 8 GPUs and "
        "Deployment 40 x 2 GPUs; check_fit = read + 2 workloads x 3 pools + advice + 3 fixes"
    )
    for size in args.pools:
        print(measure(size, args.runs))


if __name__ == "__main__":
    main()
