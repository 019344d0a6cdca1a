"""Inventory sync and pool assignment at 5,000 nodes with 8 GPUs and ~40,000 pods.

.venv/bin/python -m bench.inventory [--nodes 5000] [--runs 3] [--assign 500]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from bench import django_env
from tests.kubesim_process import kubesim_server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--assign", type=int, default=500)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, kubesim_server(Path(tmp), nodes=args.nodes) as sim:
        django_env.setup(Path(tmp), KUBECONFIG=str(sim.kubeconfig))
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from pools.inventory import inventory_sync
        from pools.kube.patcher import apply_pool
        from pools.models import Node, Pool

        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        times, statements = [], 0
        for _ in range(args.runs):
            with CaptureQueriesContext(connection) as queries:
                report = inventory_sync()
            times.append(report.seconds)
            statements = len(queries)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"inventory sync: {report}")
        print(
            f"  median {statistics.median(times):.2f} s over {args.runs} runs "
            f"({', '.join(f'{t:.2f}' for t in times)} s; the first inserts, the rest update)"
        )
        print(
            f"  SQL statements per sync: {statements} "
            f"({connection.vendor}, {Node.objects.count()} rows)"
        )
        print(
            f"  peak RSS of the process: {peak:.0f} MB (before the first sync: {rss_before:.0f} MB)"
        )
        lists = sim.count("list", "nodes") + sim.count("list", "pods")
        print(f"  LIST requests over {args.runs} syncs: {lists}")

        pools = [p.spec() for p in Pool.objects.all()]
        mixed = next(p for p in pools if p.name == "mixed")
        names = list(
            Node.objects.filter(pool=None)
            .order_by("name")
            .values_list("name", flat=True)[: args.assign]
        )
        for label, expect in (("first run", "changed"), ("second run", "unchanged")):
            patches_before = sim.count("patch")
            started = time.perf_counter()
            patched = sum(apply_pool(name, mixed, pools).patched for name in names)
            elapsed = time.perf_counter() - started
            sent = sim.count("patch") - patches_before
            print(
                f"assign {len(names)} unassigned nodes to 'mixed', {label}: {patched} {expect} "
                f"patched, {sent} PATCH requests, {elapsed:.2f} s "
                f"({elapsed / len(names) * 1000:.1f} ms a node)"
            )


if __name__ == "__main__":
    main()
