"""The fit check's cost by manifest size: 30 KB, 100 KB, 300 KB and 1 MB (pure Python).

.venv/bin/python -m bench.fit_size [--sizes 30 100 300 1000] [--runs 5] [--nodes 100]

Two manifests are grown to each size (KB of YAML text):

- `terms`: the attack of issue 25 (R1), one Pod whose required node affinity has as many
  `nodeSelectorTerms` as fit in the size (about 75 bytes each, all different): every pool's fix
  adds the pool to every term, so each fix rewrites the whole manifest;
- `list`: a `kind: List` of Deployments, each with 20 environment variables of about 200
  characters: more text for each value, as real manifests (images, commands, settings) have.

Each figure is the median over the runs of `read_manifest` then `check_fit` (every pool's
verdict, advice and one fix per pool: 3 pools) over the cluster of `bench.fit` with a
training pool of `--nodes` nodes; a manifest past the fit check's limits is refused, and the
time given is the time to refuse it. Each line gives the wall time, then the CPU time the
process used (what the wall time comes to on a quiet machine; on the shared 2-core machine
the two differ by the load). The last line is the growth factor from 30 KB to 300 KB: about
10 when the cost is linear in the size, about 100 when it is quadratic.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from bench.common import ms
from bench.fit import POOL_KEY, POOLS, api_objects
from pools.core.fit.api_objects import fit_nodes
from pools.core.fit.check import check_fit
from pools.core.fit.cluster import ClusterSnapshot
from pools.core.fit.findings import ManifestError
from pools.core.fit.workloads import read_manifest

POD_HEAD = """apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers:
  - {name: main, image: trainer:1, resources: {limits: {nvidia.com/gpu: 1}}}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
"""
TERM = "        - matchExpressions: [{{key: zone, operator: In, values: [zone-{n:06d}]}}]\n"


def terms_manifest(size: int) -> str:
    lines = [POD_HEAD]
    length, n = len(POD_HEAD), 0
    while length < size:
        lines.append(TERM.format(n=n))
        length += len(lines[-1])
        n += 1
    return "".join(lines)


def deployment(n: int) -> str:
    value = f"a setting of deployment {n:04d}, " * 6
    env = "".join(
        f"        - {{name: SETTING_{v:02d}, value: '{value}number {v:02d}'}}\n" for v in range(20)
    )
    return (
        f"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {{name: serve-{n:04d}}}\n"
        "  spec:\n    replicas: 2\n    template:\n      spec:\n        containers:\n"
        "        - name: serve\n          image: serve:1\n"
        "          resources: {limits: {nvidia.com/gpu: 1}}\n          env:\n" + env
    )


def list_manifest(size: int) -> str:
    """As many Deployments as fit in `size` bytes."""
    parts = ["apiVersion: v1\nkind: List\nitems:\n"]
    length, n = len(parts[0]), 0
    while length + len(deployment(n)) <= size:
        parts.append(deployment(n))
        length += len(parts[-1])
        n += 1
    return "".join(parts)


def outcome(text: str, snapshot: ClusterSnapshot) -> str:
    try:
        report = check_fit(read_manifest(text), snapshot, pool_key=POOL_KEY)
    except ManifestError as error:
        return f"refused ({error.as_list()[0]['message']})"
    return f"answered ({len(report.fixes)} fixes)"


def timed(runs: int, action: Callable[[], object]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each run."""
    wall, cpu = [], []
    for _ in range(runs):
        started, used = time.perf_counter(), time.process_time()
        action()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return wall, cpu


def measure(shape: str, size_kb: int, runs: int, snapshot: ClusterSnapshot) -> float:
    text = (terms_manifest if shape == "terms" else list_manifest)(size_kb * 1000)
    wall, cpu = timed(runs, lambda: outcome(text, snapshot))
    median = statistics.median(wall)
    print(
        f"  {shape:5} {size_kb:>5} KB: median {ms(median)} (CPU {ms(statistics.median(cpu))}), "
        f"{outcome(text, snapshot)}"
    )
    return median


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 100, 300, 1000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    nodes, pods = api_objects(args.nodes)
    snapshot = ClusterSnapshot(fit_nodes(nodes, pods, pool_key=POOL_KEY), POOLS)
    print(f"read_manifest + check_fit, median of {args.runs} runs, {len(nodes)} nodes, 3 pools")
    print(f"load average {' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    for shape in ("terms", "list"):
        medians = {size: measure(shape, size, args.runs, snapshot) for size in args.sizes}
        if 30 in medians and 300 in medians:
            print(f"  {shape}: growth 30 KB -> 300 KB: x{medians[300] / medians[30]:.1f}")


if __name__ == "__main__":
    main()
