"""kubesim's footprint at scale: a generated cluster seeded in-process (nodes, workload pods,
the device plugin and dcgm-exporter DaemonSet pods), its peak memory, and the cost of the
parts built on demand (one node's exporter page, the OpenAPI documents).

.venv/bin/python -m bench.kubesim_memory [--nodes 15000] [--churn-events 200000]
"""

from __future__ import annotations

import argparse
import resource
import time

from kubesim import openapi
from kubesim.churn import Churn
from kubesim.cluster import Cluster
from kubesim.dcgm import Exporter
from kubesim.scenario import generated_scenario
from kubesim.seeding import seed


def peak_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=15000)
    parser.add_argument(
        "--churn-events",
        type=int,
        default=0,
        help="then replace pods as --churn does until this many watch events were made "
        "(the watch history keeps the last 200,000: the steady state of a long churn)",
    )
    args = parser.parse_args()

    started = time.perf_counter()
    cluster = Cluster()
    seed(cluster, generated_scenario(args.nodes))
    seeded = time.perf_counter() - started
    pods = cluster.store.objects["pods"]
    daemon = sum(1 for key in pods if key.startswith("gpu-operator/"))
    print(f"{args.nodes} nodes, {len(pods) - daemon} workload pods, {daemon} DaemonSet pods")
    print(f"seeded in {seeded:.1f} s; peak RSS {peak_mib()} MiB")

    if args.churn_events:
        churn = Churn(cluster, rate=1.0)
        churn.keys = churn.workload_keys()
        started = time.perf_counter()
        for _ in range(args.churn_events // 2):
            churn.step()
        print(
            f"churn: {args.churn_events} pod events in {time.perf_counter() - started:.1f} s; "
            f"peak RSS {peak_mib()} MiB (history of {len(cluster.store.events)} events)"
        )

    exporter = Exporter(cluster)
    node = next(iter(cluster.store.objects["nodes"]))
    started = time.perf_counter()
    page = exporter.render(node)
    print(f"one node's exporter page: {len(page)} bytes in {time.perf_counter() - started:.3f} s")

    started = time.perf_counter()
    sizes = [len(openapi.v2_json().body), len(openapi.v2_proto().body)]
    sizes += [len(openapi.v3_document(gv).body) for gv in openapi.v3_paths().values()]
    print(
        f"OpenAPI documents (v2 JSON, v2 protobuf, 4 v3): {sum(sizes) // 1024} KiB, built in "
        f"{time.perf_counter() - started:.1f} s; peak RSS then {peak_mib()} MiB"
    )


if __name__ == "__main__":
    main()
