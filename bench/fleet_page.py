"""The fleet page at fleet size: 100,000 GPU nodes in 4 clusters (by default), each with the
default pools, read cold: GET /fleet/ and GET /api/v1/fleet/ as a viewer, with no cache
involved (the page reads the database only), and the SQL queries each sends. Every fifth
node (by default) is split into MIG instances: its units are counted by kind from its device
record, read node by node, where the nodes of whole GPUs are added up by the database.

.venv/bin/python -m bench.fleet_page [--nodes 100000] [--clusters 4] [--runs 5] [--mig-every 5]

The rows are written with the inventory's own upsert (one statement a batch). Each figure is
the median over the runs, with the process's CPU time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ms
from bench.django_env import setup

MODELS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S")
MIG = {
    "model": "NVIDIA-A100-SXM4-80GB",
    "memory_mib": 81920,
    "gpus": 8,
    "mig_gpus": 8,
    "units": [["mig", "nvidia.com/mig-1g.10gb", "1g.10gb", "", 1, 56]],
}


def node_row(cluster: str, n: int, pool: object, now: object, mig_every: int) -> object:
    from pools.models import Node

    mig = mig_every > 0 and n % mig_every == mig_every - 1
    return Node(
        cluster=cluster,
        name=f"gpu-{n:06d}",
        pool=pool,
        pool_label=pool.name if pool else "",  # type: ignore[attr-defined]
        gpu_model="NVIDIA-A100-SXM4-80GB-MIG-1g.10gb" if mig else MODELS[n % len(MODELS)],
        gpu_count=8,
        gpu_allocatable=0 if mig else 8,
        gpu_allocated=0 if mig else n % 9,
        devices=MIG if mig else {},
        resources_requested={"nvidia.com/mig-1g.10gb": n % 57} if mig else {},
        last_seen=now,
    )


def seed(nodes: int, clusters: list[str], mig_every: int) -> None:
    from django.utils import timezone

    from pools.core.cluster_scope import cluster_scope
    from pools.fleet.services import pools_copy
    from pools.inventory.rows import NODE_KEPT, NODE_KEY, node_values, upsert
    from pools.models import Node, Pool

    home, *others = clusters
    for other in others:
        pools_copy(source=home, target=other)
    now = timezone.now()
    per_cluster = nodes // len(clusters)
    for cluster in clusters:
        with cluster_scope(cluster):
            pools = list(Pool.objects.active())
            batch = []
            for n in range(per_cluster):
                pool = pools[n % (len(pools) + 1)] if n % (len(pools) + 1) < len(pools) else None
                batch.append(node_values(node_row(cluster, n, pool, now, mig_every)))
                if len(batch) == 5000:
                    upsert(Node, batch, unique=NODE_KEY, keep=NODE_KEPT)
                    batch = []
            if batch:
                upsert(Node, batch, unique=NODE_KEY, keep=NODE_KEPT)


def measured(runs: int, path: str, client: object) -> tuple[float, float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    walls, cpus, queries = [], [], 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as captured:
            wall, cpu = time.perf_counter(), time.process_time()
            response = client.get(path)  # type: ignore[attr-defined]
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        assert response.status_code == 200, response.status_code
        queries = len(captured)
    return statistics.median(walls), statistics.median(cpus), queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mig-every", type=int, default=5, help="0: whole GPUs only")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        setup(Path(workdir))
        from django.conf import settings
        from django.contrib.auth.models import Group, User
        from django.test import Client

        from pools.common.roles import Role
        from pools.core.clusters import ClusterAccess

        names = [settings.CLUSTER_NAME, *(f"cluster-{i}" for i in range(1, options.clusters))]
        settings.OTHER_CLUSTERS = {name: ClusterAccess(name) for name in names[1:]}
        started = time.perf_counter()
        seed(options.nodes, names, options.mig_every)
        seconds = time.perf_counter() - started
        mig = f", every {options.mig_every}th split into MIG" if options.mig_every else ""
        print(f"seeded {options.nodes:,} nodes in {len(names)} clusters{mig}: {seconds:.0f} s")
        viewer = User.objects.create_user("vera")
        viewer.groups.add(Group.objects.get(name=Role.VIEWER))
        client = Client()
        client.force_login(viewer)
        for path in ("/fleet/", "/api/v1/fleet/"):
            wall, cpu, queries = measured(options.runs, path, client)
            print(f"GET {path}: median {ms(wall)} ({ms(cpu)} CPU), {queries} SQL queries")


if __name__ == "__main__":
    main()
