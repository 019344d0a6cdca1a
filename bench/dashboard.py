"""Server time of the overview and a pool page, warm and cold metric cache, with query counts.

    .venv/bin/python -m bench.dashboard [--sizes 1000 2500 5000] [--runs 7]

A real Prometheus scrapes kubesim's exporter (every 15 s); pages are rendered in-process by
Django's test client, so the figure is the server's time, not the network's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from bench import django_env
from tests.kubesim_process import kubesim_server
from tests.servers import prometheus_server, wait_for


def gpus_scraped(prometheus_url: str) -> int:
    url = f"{prometheus_url}/api/v1/query?query=count(DCGM_FI_DEV_GPU_UTIL)"
    with urllib.request.urlopen(url) as response:  # noqa: S310 -- our own loopback server
        result = json.loads(response.read())["data"]["result"]
    return int(result[0]["value"][1]) if result else 0


def measure(client, path: str, runs: int, *, cold: bool) -> list[float]:  # type: ignore[no-untyped-def]
    from django.core.cache import cache

    times = []
    for _ in range(runs):
        if cold:
            cache.clear()
        started = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, response.status_code
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2500, 5000])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        django_env.setup(Path(tmp))
        from django.conf import settings
        from django.contrib.auth.models import User
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        from pools.inventory import inventory_sync
        from pools.models import Node

        settings.ALLOWED_HOSTS = ["testserver"]
        client = Client()
        client.force_login(User.objects.create_superuser("bench"))
        for size in args.sizes:
            work = Path(tmp) / str(size)
            with (
                kubesim_server(work / "sim", nodes=size) as sim,
                prometheus_server(
                    work / "prom",
                    scrape_targets=[sim.metrics_url.removeprefix("http://")],
                    scrape_interval="15s",
                ) as prom,
            ):
                settings.KUBECONFIG = str(sim.kubeconfig)
                settings.PROMETHEUS_URL = prom.url
                settings.PROMETHEUS_TIMEOUT = 10.0
                Node.objects.all().delete()
                inventory_sync()
                wait_for(
                    lambda prom=prom, size=size: gpus_scraped(prom.url) == size * 8,
                    timeout=120,
                    what="the first full scrape",
                )
                training = Node.objects.filter(pool__name="training").count()
                for label, path in (
                    ("overview", "/"),
                    (f"pool page ({training} nodes)", "/pools/training/"),
                ):
                    before = prom.query_count()
                    with CaptureQueriesContext(connection) as sql:
                        measure(client, path, 1, cold=True)
                    # Counted now: the next request's request_started signal empties the log.
                    sql_count = len(sql)
                    time.sleep(1)
                    promql = prom.query_count() - before
                    cold = measure(client, path, args.runs, cold=True)
                    warm = measure(client, path, args.runs, cold=False)
                    print(
                        f"{size} nodes, {label}: warm median "
                        f"{statistics.median(warm) * 1000:.0f} ms, cold median "
                        f"{statistics.median(cold) * 1000:.0f} ms; {sql_count} SQL, "
                        f"{promql} PromQL queries (cold)",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
