"""The fit check through the portal's service and API, the database read included, for a
1,000-node (and a 5,000-node) training pool.

    .venv/bin/python -m bench.fit_service [--pools 1000 5000] [--runs 15]

The inventory holds the cluster of `bench.fit` (training 40 % of the nodes, inference 30 %,
mixed 20 %, 10 % in no pool; 8 A100s a node, 0-8 of them held by one-GPU pods) as `Node`
and `GpuPod` rows in a throwaway SQLite database. Each figure is the median over the runs:

- `service`: `fit_check_run(manifest=...)` — three queries (pools, nodes, GPU pods), the
  snapshot, every pool's verdict, advice and one fix per pool;
- `api`: `POST /api/v1/fit/` through Django's test client (authentication, JSON in and out);
- `pending list`: the Pending page's selector with 50 Pending pods (one check per pod shape).

Each figure is given twice: wall-clock time, and the process's CPU time (SQLite runs in the
process, so the database read is in both). On a shared machine the wall-clock figure grows
with the load; the CPU time is what the check itself costs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import django_env
from bench.common import ms, timed
from bench.fit import MANIFEST, SHARES


def store(training_nodes: int) -> int:
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from pools.models import GpuPod, Node, Pool

    GpuPod.objects.all().delete()
    Node.objects.all().delete()
    pools = {p.name: p for p in Pool.objects.active()}
    now = timezone.now()
    total = round(training_nodes / SHARES[0][1])
    nodes, pods, start = [], [], 0
    for pool, share in SHARES:
        count = round(total * share)
        for index in range(start, start + count):
            name = f"gpu-{pool or 'new'}-{index:05d}"
            used = index % 9
            nodes.append(_node(name, pools.get(pool), used, now, settings.POOL_LABEL_KEY))
            pods += [
                GpuPod(
                    uid=f"{name}-{n}",
                    namespace="team",
                    name=f"{name}-{n}",
                    node_name=name,
                    pool_label=pool,
                    phase=GpuPod.Phase.RUNNING,
                    gpus=1,
                    cpu_milli=4000,
                    memory_bytes=32 * 2**30,
                    created_at=now - timedelta(hours=1),
                )
                for n in range(used)
            ]
        start += count
    pods += [
        GpuPod(
            uid=f"pending-{n}",
            namespace="team",
            name=f"pending-{n}",
            phase=GpuPod.Phase.PENDING,
            gpus=1 + n % 8,
            created_at=now - timedelta(minutes=n),
        )
        for n in range(50)
    ]
    Node.objects.bulk_create(nodes, batch_size=500)
    GpuPod.objects.bulk_create(pods, batch_size=1000)
    return total


def _node(name: str, pool: Any, used: int, now: Any, pool_key: str) -> Any:
    from pools.models import Node

    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    taints = []
    if pool is not None:
        labels.update({pool_key: pool.name, **pool.labels})
        if pool.taint is not None:
            taints.append(pool.taint.to_api())
    return Node(
        name=name,
        pool=pool,
        pool_label=pool.name if pool else "",
        gpu_model="NVIDIA-A100-SXM4-80GB",
        gpu_count=8,
        gpu_allocatable=8,
        gpu_allocated=used,
        cpu_allocatable="96",
        memory_allocatable="1056Gi",
        cpu_allocatable_milli=96000,
        memory_allocatable_bytes=1056 * 2**30,
        cpu_requested_milli=4000 * used,
        memory_requested_bytes=32 * 2**30 * used,
        ready=True,
        labels=labels,
        taints=taints,
        last_seen=now,
    )


def measure(size: int, runs: int) -> str:
    from django.contrib.auth.models import User
    from django.test import Client
    from django.utils import timezone

    from pools.fit.pending import pending_pods
    from pools.fit.service import fit_check_run

    total = store(size)
    report = fit_check_run(manifest=MANIFEST).report
    assert len(report.workloads) == 2 and "training" in report.fixes
    service = timed(runs, lambda: fit_check_run(manifest=MANIFEST))
    service_cpu = cpu_timed(runs, lambda: fit_check_run(manifest=MANIFEST))
    client = Client()
    client.force_login(User.objects.get_or_create(username="bench", is_superuser=True)[0])
    body = json.dumps({"manifest": MANIFEST})

    def post() -> None:
        response = client.post("/api/v1/fit/", body, content_type="application/json")
        assert response.status_code == 200, response.content[:300]

    api, api_cpu = timed(runs, post), cpu_timed(runs, post)
    pending = timed(runs, lambda: pending_pods(now=timezone.now()))
    pending_cpu = cpu_timed(runs, lambda: pending_pods(now=timezone.now()))
    return (
        f"  training pool of {size} nodes ({total} nodes in all), wall / cpu: "
        f"service {ms(statistics.median(service))} / {ms(statistics.median(service_cpu))}, "
        f"api {ms(statistics.median(api))} / {ms(statistics.median(api_cpu))}, "
        f"pending list {ms(statistics.median(pending))} / {ms(statistics.median(pending_cpu))}"
    )


def cpu_timed(runs: int, action: Any) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.process_time()
        action()
        times.append(time.process_time() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pools", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        django_env.setup(Path(tmp))
        print(
            f"fit check through the service and the API, median of {args.runs} runs; "
            "manifest: PyTorchJob 1+63 x 8 GPUs and Deployment 40 x 2 GPUs, every pool"
        )
        for size in args.pools:
            print(measure(size, args.runs))


if __name__ == "__main__":
    main()
