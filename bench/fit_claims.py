"""The fit check on pods with ResourceClaims, over clusters of DRA nodes (pure Python).

.venv/bin/python -m bench.fit_claims [--nodes 1000 5000 15000] [--runs 5]

Every node publishes 8 H100s as DRA devices (one ResourceSlice each, as NVIDIA's driver
does), every third node has 4 of them held by claims, and every node sits in one of three
pools. Each figure is the median over the runs, the snapshot and its CEL results built
afresh for each run (as each request of the portal does):

- `state`: the ResourceSlices, classes and claims read into the allocator's form
  (`dra_state`, the one query's JSON already decoded);
- `check_fit`: a Deployment of 4 replicas whose pods each claim 2 GPUs of at least 64 GiB
  through a template (every pool's verdict, advice and fixes);
- `CEL evaluations`: how many times a selector ran (identical devices share a result).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench.common import ms
from pools.core.dra import selectors
from pools.core.fit.check import check_fit
from pools.core.fit.claims import dra_state
from pools.core.fit.cluster import ClusterSnapshot, FitNode, FitPool
from pools.core.fit.resources import Resources
from pools.core.fit.workloads import read_objects

POOL_KEY = "gpu-pool"
POOLS = [FitPool("training"), FitPool("inference"), FitPool("mixed")]
DRIVER = "gpu.nvidia.com"
GPU_CLASS = {
    "metadata": {"name": DRIVER},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": f'device.driver == "{DRIVER}" && '
                    f'device.attributes["{DRIVER}"].type == "gpu"'
                }
            }
        ]
    },
}


def cluster(size: int) -> tuple[list[FitNode], list[Any], list[Any]]:
    nodes, slices, claims = [], [], []
    for index in range(size):
        name = f"h100-dra-{index:05d}"
        pool = POOLS[index % 3].name
        labels = {POOL_KEY: pool, "kubernetes.io/hostname": name}
        nodes.append(FitNode(name, pool, labels, allocatable=Resources(96_000, 1024 * 2**30)))
        devices = [_device(name, gpu) for gpu in range(8)]
        slices.append(
            {
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                }
            }
        )
        if index % 3 == 0:
            results = [
                {"driver": DRIVER, "pool": name, "device": f"gpu-{gpu}", "request": "gpu"}
                for gpu in range(4)
            ]
            claims.append(
                {
                    "metadata": {"name": f"held-{index}", "namespace": "team"},
                    "spec": {"devices": {"requests": []}},
                    "status": {"allocation": {"devices": {"results": results}}},
                }
            )
    return nodes, slices, claims


def _device(node: str, index: int) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "uuid": {"string": f"GPU-{node}-{index}"},
            "index": {"int": index},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


MANIFEST = [
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-big-gpus", "namespace": "team"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": DRIVER,
                                "count": 2,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": f'device.capacity["{DRIVER}"].memory'
                                            '.compareTo(quantity("64Gi")) >= 0'
                                        }
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    },
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "team"},
        "spec": {
            "replicas": 4,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                    "resourceClaims": [
                        {"name": "gpu", "resourceClaimTemplateName": "two-big-gpus"}
                    ],
                }
            },
        },
    },
]


class Counted:
    """Counts the selector runs (`selectors._evaluate`), the cost the memo saves."""

    def __init__(self) -> None:
        self.count = 0
        self.original = selectors._evaluate

    def __enter__(self) -> Counted:
        def counted(selector: Any, device: Any) -> Any:
            self.count += 1
            return self.original(selector, device)

        selectors._evaluate = counted
        return self

    def __exit__(self, *exc: object) -> None:
        selectors._evaluate = self.original


def run(size: int, runs: int) -> None:
    import time

    nodes, slices, claims = cluster(size)
    manifest = read_objects(MANIFEST)
    state_times, check_times, evaluations = [], [], 0
    for _ in range(runs):
        started = time.perf_counter()
        state = dra_state(slices, [GPU_CLASS], claims, [])
        state_times.append(time.perf_counter() - started)
        snapshot = ClusterSnapshot(nodes, POOLS, state)
        with Counted() as counted:
            started = time.perf_counter()
            report = check_fit(manifest, snapshot, pool_key=POOL_KEY)
            check_times.append(time.perf_counter() - started)
        evaluations = counted.count
    (verdict,) = report.workloads[0].cluster
    print(
        f"{size:>6} nodes ({size * 8:,} devices): state {ms(statistics.median(state_times))}, "
        f"check_fit {ms(statistics.median(check_times))}, CEL evaluations {evaluations}, "
        f"room {verdict.room} pods, fits now {report.workloads[0].fits_now}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000, 15000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for size in args.nodes:
        run(size, args.runs)


if __name__ == "__main__":
    main()
