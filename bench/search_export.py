"""Search and the CSV exports at scale: server time, queries and peak Python memory.

    .venv/bin/python -m bench.search_export [--nodes 5000] [--events 100000] [--runs 7]

In-process (Django's test client, production settings, SQLite): the figures are the
server's own time to answer (for an export, to stream every byte), not the network's. No
Prometheus: the node export's metric columns are blank, as when it is down.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench import django_env
from bench.common import summary


def _seed(nodes: int, events: int) -> None:
    from django.utils import timezone

    from pools.models import AuditEvent
    from tests.factories import Group, Pod, node_and_pods, store

    group = Group("bench", 1, "mixed", pods=(Pod("job", "team-a", 2, "Job", copies=3),))
    batch = 1000
    for start in range(0, nodes, batch):
        store(
            node_and_pods(f"bench-{i:05d}", group) for i in range(start, min(nodes, start + batch))
        )
    now = timezone.now()
    rows = [
        AuditEvent(
            at=now,
            actor_name="system",
            action="node.patched",
            node_name=f"bench-{i % nodes:05d}",
            message=f"event {i}",
        )
        for i in range(events)
    ]
    AuditEvent.objects.bulk_create(rows, batch_size=5000)


def _fetch(client: Any, path: str) -> int:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    if response.streaming:
        return sum(len(chunk) for chunk in response.streaming_content)
    return len(response.content)


def _measure(client: Any, path: str, runs: int) -> str:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    for _ in range(runs):
        started = time.perf_counter()
        size = _fetch(client, path)
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    with CaptureQueriesContext(connection) as queries:
        _fetch(client, path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (
        f"{summary(times)}; {size / 1e3:,.0f} kB; {len(queries)} queries; "
        f"peak Python memory {peak / 2**20:.1f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        django_env.setup(Path(tmp))
        from django.contrib.auth.models import User
        from django.test import Client

        _seed(args.nodes, args.events)
        client = Client()
        client.force_login(User.objects.create_superuser("bench"))
        client.get("/")
        print(f"{args.nodes} GPU nodes (3 pods each), {args.events} audit events")
        for path in (
            "/search/?q=bench-04999",
            "/search/?q=job-bench-01234-2",
            "/search/?q=gpu-pool%3Dmixed",
            "/search/?q=bench",
            "/api/v1/search/?q=bench&limit=100",
            "/export/nodes.csv",
            "/export/audit.csv",
            "/export/audit.csv?node=bench-00042",
        ):
            print(f"| `{path}` | {_measure(client, path, args.runs)} |")
        print(f"(median and p99 over {args.runs} runs)")


if __name__ == "__main__":
    main()
