"""What narrowing every query to one cluster costs (pure Python): the portal's queries for pools
of 1,000 to 65,000 nodes, rewritten to select `cluster="eu-west"` (pools.metrics.scope).

.venv/bin/python -m bench.promql_scope [--nodes 1000 15000 65000] [--runs 5]

The queries whose size grows with the nodes are the pool utilisation history's: every member
is named in a node matcher, and one node in seven joined or left the pool during the window
(its own spans). The node figures' queries are the same at any size. Each figure is the median
over the runs of a first rewrite (the rewriter keeps its last answers; a page asks the same
query again only after the cache's seconds), with the wall time and the process's CPU time.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import ms
from pools.metrics import queries
from pools.metrics.scope import selecting


def members(nodes: int) -> queries.Members:
    found: dict[str, list[tuple[float | None, float | None]]] = {}
    for n in range(nodes):
        moved = n % 7 == 0
        found[f"gpu-node-{n:05d}"] = [(1.0e9 + n % 3, 1.1e9)] if moved else [(None, None)]
    return found


def measured(promql: str, runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for run in range(runs):
        # A query not seen before: the rewriter's memo would answer a repeat at once.
        fresh = f"{promql} + {run}"
        wall, cpu = time.perf_counter(), time.process_time()
        selecting(fresh, "cluster", "eu-west")
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 15000, 65000])
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    labels = queries.MetricLabels()
    figures = queries.node_figure_queries(labels, hot_celsius=85, idle_window="1h")
    largest = max(figures.values(), key=len)
    wall, cpu = measured(largest, options.runs)
    print(f"node figures, largest query ({len(largest):,} bytes): {ms(wall)} ({ms(cpu)} CPU)")
    for nodes in options.nodes:
        pools = {"training": members(nodes)}
        for name, promql in queries.pool_utilisation_queries(labels, pools).items():
            wall, cpu = measured(promql, options.runs)
            print(
                f"{nodes:>6,} nodes, pool {name} ({len(promql) / 1e6:.2f} MB): "
                f"{ms(wall)} ({ms(cpu)} CPU)"
            )


if __name__ == "__main__":
    main()
