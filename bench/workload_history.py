"""kubesim's workload model at scale: a cluster of N nodes whose workload leaves M finished
pods behind (kept as objects, as a LIST or a WATCH sees them), replayed in-process on the
cluster clock. Prints the replay time, the peak memory and what a finished pod costs, and
how long a LIST of every pod takes to assemble.

.venv/bin/python -m bench.workload_history [--nodes 1000] [--pods 100000] [--days 7] [--runs 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from kubesim.clock import Clock
from kubesim.cluster import Cluster
from kubesim.scenario import NodeGroup, Scenario
from kubesim.seeding import seed
from kubesim.store import Store
from kubesim.workload import OOM_KILLED, JobClass
from kubesim.workload_runner import WorkloadRunner

START = 1_790_035_200.0  # a UTC midnight
POOLS = ("training", "inference", "mixed", "batch")


def peak_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def scenario(nodes: int) -> Scenario:
    groups = [
        NodeGroup(
            name=pool,
            count=nodes // len(POOLS),
            prefix=f"gpu-{pool}",
            gpu_model="NVIDIA-A100-SXM4-80GB",
            gpus=8,
            gpu_memory=81920,
            family="ampere",
            labels={"gpu-pool": pool, "workload-type": pool},
            taints=[],
            ready=True,
            unschedulable=False,
            pods=[],
        )
        for pool in POOLS
    ]
    return Scenario(f"bench-{nodes}", groups, [])


def classes(pods: int, days: float) -> tuple[JobClass, ...]:
    per_hour = pods / (days * 24) / len(POOLS)
    return tuple(
        JobClass(
            name=f"{pool}-job",
            namespace=f"team-{pool}",
            team=pool,
            workload_type=pool,
            gpus=1,
            run_median=3600,
            run_p90=7200,
            arrivals_per_hour=per_hour,
            pool=pool,
            failures={OOM_KILLED: 0.05},
        )
        for pool in POOLS
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--runs", type=int, default=3, help="LIST assemblies to time")
    args = parser.parse_args()

    cluster = Cluster(store=Store(Clock()))
    cluster.store.clock.set_now(START)
    seed(cluster, scenario(args.nodes))
    seeded = peak_mib()
    runner = WorkloadRunner(
        cluster, classes(args.pods, args.days), seed=1, retention=(args.days + 1) * 86400
    )
    runner.start(START)
    began = time.perf_counter()
    cluster.timers.run_until(START + args.days * 86400)
    replay = time.perf_counter() - began
    pods = cluster.store.objects["pods"]
    finished = sum(1 for r in runner.records.values() if r.finished is not None)
    after = peak_mib()
    print(
        f"{args.nodes} nodes; {len(runner.records)} workload pods over {args.days:g} days, "
        f"{finished} finished, {len(pods)} pod objects (DaemonSet pods included)"
    )
    print(f"replayed in {replay:.1f} s ({len(runner.records) / replay:.0f} pods/s)")
    print(
        f"peak RSS {after} MiB ({seeded} MiB after seeding the nodes): "
        f"{(after - seeded) * 1024 / max(1, len(runner.records)):.1f} KiB a workload pod "
        "(its object, its JSON, its record, its watch history share)"
    )
    times = []
    for _ in range(args.runs):
        began = time.perf_counter()
        with cluster.store.lock:
            _, entries = cluster.store.list("pods", None)
            body = b",".join(e.raw for e in entries)
        times.append(time.perf_counter() - began)
    print(
        f"LIST of every pod assembled: {len(body) / 2**20:.0f} MiB, "
        f"median {statistics.median(times) * 1000:.0f} ms over {args.runs} runs"
    )


if __name__ == "__main__":
    main()
