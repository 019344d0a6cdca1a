"""A pool's maintenance headroom over large pools (pure Python).

.venv/bin/python -m bench.headroom [--nodes 1000 5000 15000] [--runs 5]

Each node runs 8 GPU pods: one of 200 serving Deployments (labels `app`, `tier`) and one of
the gangs of 4 pods (one node in ten), the rest standalone; 200 PodDisruptionBudgets select
the Deployments by `app` (half by matchLabels, half by matchExpressions) and allow 1 to 20
disruptions; one node in fifty is cordoned; the pool keeps a tenth of its nodes. Each figure
is the median over the runs:

- `headroom`: the figure, the drainable nodes and every blocker (pools.core.headroom);
- `drain 100`: what would stop draining 100 chosen nodes together (the move form's check).

The database side is three queries whatever the pool's size (tests/pages/test_query_counts.py),
and the budgets one LIST, kept BUDGETS_CACHE_SECONDS.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import ms
from pools.core.headroom import Budget, HeadroomNode, HeadroomPod, drain_blockers, headroom

APPS = 200
PODS_PER_NODE = 8


def world(size: int) -> tuple[list[HeadroomNode], list[HeadroomPod], list[Budget]]:
    nodes = [HeadroomNode(f"gpu-{i:05d}", cordoned=i % 50 == 0) for i in range(size)]
    pods = []
    for i, node in enumerate(nodes):
        for slot in range(PODS_PER_NODE):
            if slot == 0 and i % 10 == 0:
                gang = f"PyTorchJob ml/train-{i // 40}"
                pods.append(HeadroomPod("ml", f"w-{i}-{slot}", node.name, {}, gang))
                continue
            app = f"app-{(i * PODS_PER_NODE + slot) % APPS}"
            labels = {"app": app, "tier": "serving"}
            pods.append(HeadroomPod("serving", f"{app}-{i}-{slot}", node.name, labels))
    budgets = []
    for a in range(APPS):
        if a % 2:
            selector = {"matchLabels": {"app": f"app-{a}"}}
        else:
            selector = {
                "matchExpressions": [{"key": "app", "operator": "In", "values": [f"app-{a}"]}]
            }
        budgets.append(Budget("serving", f"app-{a}", selector, 1 + a % 20))
    return nodes, pods, budgets


def run(size: int, runs: int) -> None:
    nodes, pods, budgets = world(size)
    found_times, drain_times = [], []
    found = None
    for _ in range(runs):
        started = time.perf_counter()
        found = headroom("serving", nodes, pods, budgets, min_nodes=size // 10)
        found_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        drain_blockers(nodes, pods, budgets, [n.name for n in nodes[1:101]])
        drain_times.append(time.perf_counter() - started)
    assert found is not None
    print(
        f"{size:>6} nodes ({len(pods):,} GPU pods, {len(budgets)} budgets): "
        f"headroom {ms(statistics.median(found_times))} ({found.drainable_now} drainable, "
        f"{len(found.blockers)} blockers), drain 100 {ms(statistics.median(drain_times))}",
        flush=True,
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
