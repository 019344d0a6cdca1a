"""Page cost does not grow with the cluster: the same PromQL and SQL counts at 10 and 1,000
nodes (Prometheus' own query log counts the PromQL), with the recording rules loaded."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from pools.inventory import inventory_sync
from pools.metrics.dcgm import metric_labels
from pools.metrics.queries import PER_GPU_METRICS, recorded_figure_queries
from pools.models import Node
from tests.kubesim_process import kubesim_server
from tests.servers import PrometheusServer, prometheus_server, wait_for


def _answered(prom: PrometheusServer, promql: str) -> bool:
    url = f"{prom.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return bool(json.loads(answer.read())["data"]["result"])


def _every_figure_recorded(prom: PrometheusServer, settings) -> bool:  # type: ignore[no-untyped-def]
    """Every recorded series the pages read exists: the rules have been evaluated once over
    every node. Before that a page asks the missing figures raw as well (one more query
    each), and on a loaded machine the first evaluation at 1,000 nodes takes a while."""
    recorded = recorded_figure_queries(
        metric_labels(), hot_celsius=settings.GPU_HOT_CELSIUS, idle_window=settings.GPU_IDLE_WINDOW
    )
    return all(_answered(prom, promql) for promql in recorded.values())


def page_costs(tmp_path: Path, settings, nodes: int) -> dict[str, tuple[int, int]]:  # type: ignore[no-untyped-def]
    with (
        # The fields the portal reads, as an exporter's counters file would choose them.
        kubesim_server(
            tmp_path / f"sim{nodes}",
            nodes=nodes,
            extra=["--exporter-counters", ",".join(PER_GPU_METRICS)],
        ) as sim,
        prometheus_server(
            (tmp_path / f"prom{nodes}"),
            scrape_targets=[sim.metrics_url.removeprefix("http://")],
            scrape_interval="5s",
        ) as prom,
    ):
        settings.KUBECONFIG = str(sim.kubeconfig)
        settings.PROMETHEUS_URL = prom.url
        Node.objects.all().delete()
        inventory_sync()
        wait_for(
            lambda: _every_figure_recorded(prom, settings),
            timeout=180,
            what="every recording rule's first series",
        )
        client = Client()
        client.force_login(User.objects.get_or_create(username="root", is_superuser=True)[0])
        node = Node.objects.filter(pool__name="training").order_by("name").first()
        assert node is not None
        costs = {}
        for name, path in (
            ("overview", "/"),
            ("pool", "/pools/training/"),
            ("node", f"/nodes/{node.name}/"),
            ("node-live", f"/nodes/{node.name}/?partial=live"),
            ("api-nodes", "/api/v1/nodes/"),
            ("api-summary", "/api/v1/summary/"),
        ):
            cache.clear()
            before = prom.settled_count()  # the last page's queries all logged
            with CaptureQueriesContext(connection) as sql:
                assert client.get(path).status_code == 200
            costs[name] = (prom.queries_since(before), len(sql))
        # A warm cache asks Prometheus nothing more for the same page.
        cache.clear()
        before = prom.settled_count()
        client.get("/")
        client.get("/")
        costs["overview-warm"] = (prom.queries_since(before), 0)
        return costs


@pytest.mark.django_db
def test_query_counts_do_not_grow_with_the_cluster(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    settings.METRICS_CACHE_SECONDS = 30
    small = page_costs(tmp_path, settings, 10)
    large = page_costs(tmp_path, settings, 1000)
    assert small == large
    # The overview: one query for the pool rules' sums (none here: this Prometheus scrapes no
    # membership; tests/edges/metrics/test_pool_sums.py has them), then 9 batched node
    # figures (recorded series); the pool page adds its
    # history, from the recorded series and, for the part of the 24 h before the rules'
    # first point (this Prometheus started a minute ago), from the raw ones; the node page
    # asks one per-GPU query and its five per-GPU histories
    # (utilisation, framebuffer, temperature, power, XID).
    assert small["overview"][0] == 1 + 9
    assert small["pool"][0] == 9 + 2
    assert small["node"][0] == 1 + 5
    assert small["node-live"][0] == 1  # the refresh every few seconds skips the 24 h charts
    assert small["api-nodes"][0] == 9
    assert small["api-summary"][0] == 1 + 9  # the overview's figures
    assert small["overview-warm"][0] == 1 + 9  # the first of the two warms the cache
    assert all(sql > 0 for _, sql in (small["overview"], small["pool"], small["node"]))
