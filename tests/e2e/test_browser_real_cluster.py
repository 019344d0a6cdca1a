"""A person's walk through the portal on the real control plane, in headless Chromium: the
pages built from the inventory of a real API server, the GPU figures Prometheus scraped
from the kubelets' DCGM exporter (one GPU set to a known utilisation and an XID through
the kubelet's control endpoint), and a move approved on its page and carried out by a
Celery worker, seen on the page and on the real nodes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from pools.inventory import inventory_sync
from pools.models import MoveRequest
from tests.e2e import test_browser
from tests.e2e.test_browser import CHROMIUM, DESKTOP, Watched
from tests.edges.metrics.test_dashboard import scraped
from tests.real_cluster import RealCluster
from tests.servers import PrometheusServer, RedisServer, prometheus_server, wait_for
from tests.workers import celery_worker

NODE = "a100-train-001"
chromium_browser = test_browser.chromium_browser
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (make test installs it with apt when run as root)",
    ),
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize(
        "backend", [pytest.param("kubernetes", marks=pytest.mark.kubernetes)], indirect=True
    ),
]


@pytest.fixture
def prom(cluster: RealCluster, tmp_path: Path) -> Iterator[PrometheusServer]:
    """A Prometheus scraping the kubelets' exporter, once it has the figures set here."""
    cluster.control("gpus", {"node": NODE, "gpu": "all", "util": 80})
    cluster.control("gpus", {"node": NODE, "gpu": 3, "util": 20, "xid": 79})
    target = cluster.metrics_url.removeprefix("http://")
    with prometheus_server(tmp_path / "prom", scrape_targets=[target], rules=False) as server:
        query = f'DCGM_FI_DEV_XID_ERRORS{{Hostname="{NODE}",gpu="3"}}'
        wait_for(lambda: scraped(server, query, 79), timeout=60, what="the exporter scraped")
        yield server


def test_the_pages_show_the_real_clusters_nodes_and_a_move_lands_on_them(  # type: ignore[no-untyped-def]
    cluster: RealCluster,
    prom: PrometheusServer,
    live_server,
    settings,
    chromium_browser,
    redis: RedisServer,
    tmp_path: Path,
) -> None:
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    settings.LIVE_REFRESH_SECONDS = 1
    inventory_sync()
    User.objects.create_superuser("ada", password="walk-the-real-pools-1")
    watched = Watched(chromium_browser, viewport=DESKTOP)
    watched.log_in(live_server.url, "ada", "walk-the-real-pools-1")
    page = watched.page

    # The overview and the pool page count what the real API server lists.
    training = [
        n.metadata.name for n in cluster.core().list_node(label_selector="gpu-pool=training").items
    ]
    page.goto(f"{live_server.url}/pools/training/")
    rows = page.locator("table.nodes tbody tr")
    assert sorted(rows.nth(i).get_attribute("data-node") or "" for i in range(rows.count())) == (
        sorted(training)
    )

    # The node page: its GPUs as Prometheus scraped them from the kubelet's exporter.
    page.goto(f"{live_server.url}/nodes/{NODE}/")
    page.wait_for_selector('tr[data-gpu="3"]', timeout=30_000)
    assert page.locator('tr[data-gpu="3"] [data-col="util"]').inner_text() == "20 %"
    assert page.locator('tr[data-gpu="0"] [data-col="util"]').inner_text() == "80 %"
    assert page.locator('tr[data-gpu="3"] [data-col="xid"]').inner_text().startswith("79")

    # A move approved on its page: the worker patches the real nodes.
    move, approver = test_browser.pending_move_and_its_approver(chromium_browser, live_server.url)
    test_browser.approve_on_its_page(approver, live_server.url, move)
    with celery_worker(tmp_path):
        approver.page.wait_for_selector('[data-move-state="succeeded"]', timeout=90_000)
    move.refresh_from_db()
    assert move.state == MoveRequest.State.SUCCEEDED
    for name in ("gpu-new-000", "gpu-new-001"):
        node = cluster.core().read_node(name)
        assert node.metadata.labels["gpu-pool"] == "mixed"
        state = approver.page.locator(
            f'#move-live tr[data-node="{name}"] [data-col="result"] .state'
        )
        assert state.inner_text().strip() == "Done"
    assert re.search(r"2 of 2 nodes finished", approver.page.inner_text("#move-live"))
    assert watched.problems == [] and approver.problems == [], watched.problems + approver.problems
