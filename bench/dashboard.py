"""Server time of the overview and a pool page, warm and cold metric cache, with query counts,
read from the recording rules' series and from the raw expressions side by side.

    .venv/bin/python -m bench.dashboard [--sizes 5000 15000] [--runs 7] [--modes rules raw fed]
        [--pages overview pool] [--prometheus-timeout 10] [--profile]

kubesim generates the cluster and exports the DCGM fields the portal reads (as a
dcgm-exporter's counters file would choose them); a real Prometheus scrapes it every 60 s (kubesim
renders 15,000 nodes' series in Python in most of a minute),
one with the project's recording rules and, for `raw`, one without. Pages are rendered
in-process by Django's test client, so the figure is the server's time, not the network's.
Cold: the cache is cleared before each request, so the page waits for Prometheus. The cold
requests fall between two scrapes of the simulator, whose exporter renders every simulated
GPU's series in Python (on a real cluster, each node's dcgm-exporter's work).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import secrets
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import yaml

from bench import django_env
from bench.common import between_prometheus_work
from pools.metrics.queries import PER_GPU_METRICS
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import (
    RULES,
    PrometheusServer,
    StaticPage,
    prometheus_server,
    static_page,
    wait_for,
)

SCRAPE_SECONDS = 60
METRICS_TOKEN = secrets.token_urlsafe(24)  # the in-process portal's, for /metrics/pools
RECORDED_COUNT = "Hostname:DCGM_FI_DEV_GPU_UTIL:count"


def scalar(prometheus_url: str, promql: str) -> int:
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{prometheus_url}/api/v1/query?{query}") as response:  # noqa: S310 -- our own loopback server
        result = json.loads(response.read())["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(client, path: str, runs: int, *, cold: bool, prometheus_pid: int | None = None):  # type: ignore[no-untyped-def]
    """Wall time of each request, and its CPU time: the portal's (every thread of this
    process) plus Prometheus' (its process, during the request). On a machine shared with
    other work, wall time is mostly waiting for a core; CPU time is what the request costs."""
    from django.core.cache import cache

    walls, cpus, portal_cpus = [], [], []
    unavailable = 0
    for _ in range(runs):
        if cold:
            cache.clear()
        prom_before = cpu_seconds(prometheus_pid) if prometheus_pid else 0.0
        cpu_before = time.process_time()
        started = time.perf_counter()
        response = client.get(path)
        walls.append(time.perf_counter() - started)
        portal_cpus.append(time.process_time() - cpu_before)
        prom_cpu = cpu_seconds(prometheus_pid) - prom_before if prometheus_pid else 0.0
        cpus.append(portal_cpus[-1] + prom_cpu)
        assert response.status_code == 200, response.status_code
        unavailable += b"Metrics unavailable:" in response.content
    if unavailable:
        # A page that showed "metrics unavailable" (a Prometheus timeout) is no cold figure.
        print(f"  {path}: {unavailable} of {runs} answers without metrics", flush=True)
    return walls, cpus, portal_cpus


def pool_rules_file(work: Path) -> Path:
    """The project's pool rules alone (and the marker every rules file records): where the
    per-node series come federated, the pool sums are still made here, over the membership
    the portal exports."""
    rules = yaml.safe_load(RULES.read_text())
    marker = {"record": "gpu_pool_portal:rules_loaded", "expr": "vector(1)"}
    groups = [g for g in rules["groups"] if g["name"] == "gpu-pool-portal.pool"]
    work.mkdir(parents=True, exist_ok=True)
    path = work / "pool-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "marker", "rules": [marker]}, *groups]}))
    return path


def publish_membership(client, page: StaticPage, prom: PrometheusServer) -> None:  # type: ignore[no-untyped-def]
    """What the portal's /metrics/pools answers, handed to Prometheus, and its pool rules run
    over it."""
    from pools.core.pool_sums import membership_digest
    from pools.fleet.membership_export import membership
    from pools.models import Node

    walls, cpus = [], []
    for _ in range(3):
        cpu, started = time.process_time(), time.perf_counter()
        answer = client.get("/metrics/pools", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
        assert answer.status_code == 200, answer.status_code
    print(
        f"  /metrics/pools: {len(answer.content) / 1e6:.1f} MB, median "
        f"{statistics.median(walls) * 1000:.0f} ms (CPU {statistics.median(cpus) * 1000:.0f} ms)",
        flush=True,
    )
    page.body = answer.content
    digest = membership_digest(membership())
    wait_for(
        lambda: (
            scalar(prom.url, f'count({{__name__=~"portal_pool:.+", digest="{digest}"}})')
            == 8 * Node.objects.present().values("pool").distinct().count()
        ),
        timeout=300,
        what="every pool rule over the portal's membership",
    )
    pool_rules_cost(prom)


def pool_rules_cost(prom: PrometheusServer, runs: int = 3) -> None:
    """What evaluating the pool rules costs Prometheus each interval: their expressions asked
    one after another as instant queries, between the simulator's scrapes (Prometheus' own
    last-evaluation figure is one wall time, stretched by whatever else ran then)."""
    rules = yaml.safe_load(RULES.read_text())
    (group,) = [g for g in rules["groups"] if g["name"] == "gpu-pool-portal.pool"]
    walls, cpus = [], []
    for _ in range(runs):
        between_prometheus_work(prom.url, SCRAPE_SECONDS, 30)
        cpu, started = cpu_seconds(prom.process.pid), time.perf_counter()
        for rule in group["rules"]:
            scalar(prom.url, f"count({rule['expr']})")
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_seconds(prom.process.pid) - cpu)
    print(
        f"  pool rules, one evaluation ({len(group['rules'])} expressions): median "
        f"{statistics.median(walls) * 1000:.0f} ms (Prometheus CPU "
        f"{statistics.median(cpus) * 1000:.0f} ms)",
        flush=True,
    )


@contextlib.contextmanager
def scraped(
    sim: Kubesim, work: Path, size: int, *, mode: str
) -> Iterator[tuple[PrometheusServer, StaticPage]]:
    """`rules`: every GPU's series and the rules over them; `raw`: the series alone; `fed`:
    the recorded series alone, as federation or remote-write from the cluster's own
    Prometheus would bring them (kubesim's /metrics/recorded); `pooled`: as `fed`, with the
    pool rules over the portal's exported membership (the overview reads their sums)."""
    fed = mode in ("fed", "pooled")
    pooled = mode == "pooled"
    with contextlib.ExitStack() as stack:
        page = stack.enter_context(static_page())
        prom = stack.enter_context(
            prometheus_server(
                work,
                scrape_targets=[sim.metrics_url.removeprefix("http://")],
                # kubesim renders every GPU's series in Python: 15,000 nodes take most of a
                # minute.
                scrape_interval=f"{SCRAPE_SECONDS}s",
                scrape_timeout=f"{SCRAPE_SECONDS - 2}s",
                rules=mode == "rules" or pooled,
                rules_file=pool_rules_file(work) if pooled else None,
                metrics_path="/metrics/recorded" if fed else "/metrics",
                extra_targets={"portal-pools": f"127.0.0.1:{page.server_port}"} if pooled else None,
            )
        )
        first = (
            "count(Hostname:DCGM_FI_DEV_GPU_UTIL:count)" if fed else "count(DCGM_FI_DEV_GPU_UTIL)"
        )
        wait_for(
            lambda: scalar(prom.url, first) == (size if fed else size * 8),
            timeout=600,
            what="the first full scrape",
        )
        if mode == "rules":
            wait_for(
                lambda: (
                    scalar(prom.url, "count(Hostname:DCGM_FI_DEV_GPU_UTIL:count_held_idle)") == size
                ),
                timeout=300,
                what="the recorded figures",
            )
        yield prom, page


def report(  # type: ignore[no-untyped-def]
    client, prom: PrometheusServer, size: int, mode: str, runs: int, profile: bool, pages: list[str]
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from pools.fleet.selectors import recorded_pool_figure_set
    from pools.metrics.node_figures import latest_node_metrics
    from pools.models import Node

    training = Node.objects.filter(pool__name="training").count()
    chosen = {
        "overview": ("overview", "/"),
        "pool": (f"pool page ({training} nodes)", "/pools/training/"),
    }
    for label, path in (chosen[page] for page in pages):
        before = prom.query_count()
        with CaptureQueriesContext(connection) as sql:
            measure(client, path, 1, cold=True)
        sql_count = len(sql)  # counted now: the next request empties the log
        promql = prom.queries_since(before)
        # What the cold request got: each pool's sums (the pool rules), or figures for every
        # node, or the error the page showed. Asking the node figures here when the page used
        # the sums would only make work the page did not do.
        if path == "/" and recorded_pool_figure_set() is not None:
            print(f"  {label}: each pool's sums from the pool rules", flush=True)
        else:
            result, metrics = latest_node_metrics()
            print(f"  {label}: figures for {len(metrics)} nodes, error {result.error}", flush=True)
        pid = prom.process.pid
        # Not while the simulator renders its exporter's page (common.between_prometheus_work): a
        # cold request there measures kubesim; room for the runs at 3 s each.
        between_prometheus_work(prom.url, SCRAPE_SECONDS, 3 * runs)
        cold, cold_cpu, cold_portal = measure(client, path, runs, cold=True, prometheus_pid=pid)
        warm, warm_cpu, warm_portal = measure(client, path, runs, cold=False, prometheus_pid=pid)

        def ms(values: list[float]) -> str:
            return f"{statistics.median(values) * 1000:.0f} ms"

        print(
            f"{size} nodes, {mode}, {label}: warm median {ms(warm)} (CPU {ms(warm_cpu)}, "
            f"portal {ms(warm_portal)}), cold median {ms(cold)} (CPU {ms(cold_cpu)}, portal "
            f"{ms(cold_portal)}); {sql_count} SQL, {promql} PromQL queries (cold); "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        if profile:
            for kind in ("cold", "warm"):
                # CPU time, not wall time: on a shared machine a wall-clock profile charges
                # the time the process waited for a core to whatever it was running. The
                # process's CPU (every thread): the query threads' decoding shows as the
                # main thread's wait for them.
                profiler = cProfile.Profile(time.process_time)
                profiler.runcall(measure, client, path, 3, cold=kind == "cold")
                print(f"--- profile: {label}, {kind}, 3 requests (own CPU time) ---")
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 15000])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=["rules", "raw", "fed", "pooled"],
        default=["rules", "raw"],
    )
    parser.add_argument("--profile", action="store_true", help="print a profile of each page")
    parser.add_argument(
        "--prometheus-timeout",
        type=float,
        default=10.0,
        help="PROMETHEUS_TIMEOUT for the pages (a cold page that runs out shows no metrics)",
    )
    parser.add_argument(
        "--pages",
        nargs="+",
        choices=["overview", "pool"],
        default=["overview", "pool"],
        help="which pages to measure",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        django_env.setup(Path(tmp))
        from django.conf import settings
        from django.contrib.auth.models import User
        from django.test import Client

        from pools.inventory import inventory_sync
        from pools.models import Node

        settings.ALLOWED_HOSTS = ["testserver"]
        client = Client()
        client.force_login(User.objects.create_superuser("bench"))
        for size in args.sizes:
            work = Path(tmp) / str(size)
            counters = ",".join(PER_GPU_METRICS)
            with kubesim_server(
                work / "sim",
                nodes=size,
                extra=["--exporter-counters", counters],
                start_timeout=900,
            ) as sim:
                settings.KUBECONFIG = str(sim.kubeconfig)
                settings.KUBE_TIMEOUT = 60.0  # kubesim lists slowly on a busy machine
                Node.objects.all().delete()
                started = time.perf_counter()
                inventory_sync()
                print(f"{size} nodes: inventory synced in {time.perf_counter() - started:.1f} s")
                for mode in args.modes:
                    with scraped(sim, work / mode, size, mode=mode) as (prom, page):
                        settings.PROMETHEUS_URL = prom.url
                        settings.PROMETHEUS_TIMEOUT = args.prometheus_timeout
                        settings.METRICS_TOKEN = METRICS_TOKEN
                        if mode == "pooled":
                            publish_membership(client, page, prom)
                        report(client, prom, size, mode, args.runs, args.profile, args.pages)


if __name__ == "__main__":
    main()
