"""The dashboard against a real Prometheus scraping kubesim's exporter."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from pools.inventory import inventory_sync
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import role_group
from tests.overview_html import card, figure
from tests.servers import PrometheusServer, prometheus_server, wait_for, wait_rules_caught_up

Stack = tuple[Kubesim, PrometheusServer]


def promql(prom: PrometheusServer, query: str) -> list[dict]:  # type: ignore[type-arg]
    url = f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())["data"]["result"]


def scraped(prom: PrometheusServer, query: str, expected: float) -> bool:
    result = promql(prom, query)
    return bool(result) and abs(float(result[0]["value"][1]) - expected) < 1e-6


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim")) as sim:
        # Known figures: every training GPU at 80 %, but one at 20 %; the four serving GPUs of
        # each inference node at 50 % (the embedder's GPU and the free ones stay at 0); an XID
        # on one inference GPU; one reserve node whose exporter is missing.
        for node in [
            "a100-train-000",
            "a100-train-001",
            "a100-train-002",
            "a100-train-003",
            "a100-train-drift-000",
        ]:
            sim.control("gpus", {"node": node, "gpu": "all", "util": 80})
        sim.control("gpus", {"node": "a100-train-000", "gpu": 0, "util": 20})
        for node in [f"a100-infer-00{i}" for i in range(5)] + [
            f"h100-infer-00{i}" for i in range(3)
        ]:
            sim.control("gpus", {"node": node, "gpu": [0, 1, 2, 3], "util": 50})
        sim.control("gpus", {"node": "a100-infer-001", "gpu": 2, "xid": 79})
        sim.control("exporter", {"node": "a100-reserve-003", "enabled": False})
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(tmp_path_factory.mktemp("prom"), scrape_targets=[target]) as prom:
            wait_for(
                lambda: scraped(prom, 'avg(DCGM_FI_DEV_GPU_UTIL{Hostname=~"a100-train.*"})', 78.5),
                timeout=30,
                what="the overrides to be scraped",
            )
            wait_rules_caught_up(prom)
            yield sim, prom


@pytest.fixture
def portal(stack: Stack, settings, db) -> Client:  # type: ignore[no-untyped-def]
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    # What the figures say, not how fast: a loaded machine's Prometheus may take more than
    # the default 2 s, and a page past it shows "—" (that wait is tested on its own).
    settings.PROMETHEUS_TIMEOUT = 30
    inventory_sync()
    client = Client()
    viewer = User.objects.create_user("vera")
    viewer.groups.add(role_group("viewers"))
    client.force_login(viewer)
    return client


def test_overview_figures_equal_the_exporters(portal: Client) -> None:
    html = portal.get("/").content.decode()
    training = card(html, "training")
    assert figure(training, "util") == "78.5 %"  # (39 x 80 + 20) / 40
    assert (figure(training, "gpus"), figure(training, "allocated")) == ("40", "40")
    assert figure(training, "drifted") == "1 drifted"
    inference = card(html, "inference")
    assert figure(inference, "util") == "25.0 %"  # 4 of 8 GPUs at 50 % on every node
    assert figure(inference, "xid") == "1 XID"
    assert (figure(inference, "gpus"), figure(inference, "unallocated")) == ("64", "27")
    assert figure(inference, "idle-held") == "5 held but idle"  # the idle embedders
    mixed = card(html, "mixed")
    assert figure(mixed, "no-metrics") == "1 without metrics"
    assert figure(mixed, "free-whole-nodes") == "0"
    assert figure(mixed, "largest-free-block") == "7"
    unassigned = card(html, "unassigned")
    assert (figure(unassigned, "free-whole-nodes"), figure(unassigned, "util")) == ("2", "0.0 %")
    assert "Metrics unavailable" not in html
    summary = portal.get("/api/v1/summary/").json()
    for figures in [summary["cluster"], *(p["figures"] for p in summary["pools"])]:
        assert figures["gpus"] == (
            figures["allocated"] + figures["unallocated"] + figures["unschedulable_gpus"]
        )
        assert figures["largest_free_block"] <= figures["unallocated"]


def test_pool_page_table_and_filters(portal: Client) -> None:
    html = portal.get("/pools/training/").content.decode()
    row = re.search(r'<tr data-node="a100-train-000">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert '<td class="n" data-col="util">72 %</td>' in row  # (7 x 80 + 20) / 8 = 72.5, shown 72
    drifted = portal.get("/pools/training/?drifted=true").content.decode()
    assert re.findall(r'data-node="([^"]+)"', drifted) == ["a100-train-drift-000"]
    by_util = portal.get("/pools/training/?sort=util").content.decode()
    assert re.findall(r'data-node="([^"]+)"', by_util)[0] == "a100-train-000"
    xid = portal.get("/pools/inference/?health=xid").content.decode()
    assert re.findall(r'data-node="([^"]+)"', xid) == ["a100-infer-001"]
    no_metrics = portal.get("/pools/mixed/?health=no-metrics").content.decode()
    assert re.findall(r'data-node="([^"]+)"', no_metrics) == ["a100-reserve-003"]
    assert "no DCGM metrics" in no_metrics


def test_pool_page_scheduling_block_follows_the_pool(portal: Client) -> None:
    html = portal.get("/pools/inference/?snippet_model=NVIDIA-H100-80GB-HBM3").content.decode()
    block = re.search(r'<pre id="snippet"[^>]*>(.*?)</pre>', html, re.S).group(1)  # type: ignore[union-attr]
    assert "key: gpu-pool" in block and "- inference" in block
    assert "key: nvidia.com/gpu.product" in block and "- NVIDIA-H100-80GB-HBM3" in block
    assert "key: workload-inference" in block and "effect: NoSchedule" in block
    assert "nvidia.com/gpu: 1" in block


def test_node_page_shows_per_gpu_rows_and_managed_keys(portal: Client) -> None:
    html = portal.get("/nodes/a100-infer-001/").content.decode()
    assert html.count('data-gpu="') == 8
    gpu2 = re.search(r'<tr data-gpu="2">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert (
        '<td class="n state-bad" data-col="xid">79 '
        '<span class="xid-meaning">GPU has fallen off the bus</span></td>'
    ) in gpu2
    assert "ml-serving/chat-serving-a100-infer-001-0" in html
    assert re.search(r'<tr class="managed"><td><code>gpu-pool</code>', html)
    assert re.search(
        r'<tr class="managed"><td><code>workload-inference=true:NoSchedule</code>', html
    )
    # Keys break only after their dots and slashes (a <wbr> there), never inside a word.
    assert re.search(r"<tr ><td><code>nvidia.<wbr>com/<wbr>gpu.<wbr>product</code>", html)


def test_node_without_exporter_says_monitoring_is_missing(portal: Client) -> None:
    html = portal.get("/nodes/a100-reserve-003/").content.decode()
    assert "No DCGM metrics arrive for this node" in html


def test_live_partials_render_alone(portal: Client) -> None:
    partial = portal.get("/?partial=live").content.decode()
    assert "<html" not in partial and 'data-pool="training"' in partial
    assert "<html" not in portal.get("/pools/training/?partial=live").content.decode()
    assert "<html" not in portal.get("/nodes/a100-train-000/?partial=live").content.decode()


@pytest.mark.django_db
def test_prometheus_down_gives_a_200_page_that_says_so(
    stack: Stack, settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    sim, _ = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.METRICS_CACHE_SECONDS = 0
    inventory_sync()
    client = Client()
    client.force_login(User.objects.create_superuser("root"))
    target = sim.metrics_url.removeprefix("http://")
    with prometheus_server(tmp_path, scrape_targets=[target]) as own:
        settings.PROMETHEUS_URL = own.url
        assert "Metrics unavailable" not in client.get("/").content.decode()
    for path in ("/", "/pools/training/", "/nodes/a100-train-000/"):
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        assert f"Metrics unavailable:</strong> Prometheus unreachable at {own.url}" in html, path
    html = client.get("/").content.decode()
    # Inventory figures stay; metric figures are unknown, not zero.
    training = card(html, "training")
    assert figure(training, "gpus") == "40" and figure(training, "util") == "—"
    assert "health unknown (no metrics)" in training


def test_anyone_without_a_role_is_refused(stack: Stack, db) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(User.objects.create_user("nobody"))
    assert client.get("/").status_code == 403
    assert client.get("/pools/training/").status_code == 403


def test_node_page_draws_one_line_per_gpu_from_the_exporter(portal: Client) -> None:
    html = portal.get("/nodes/a100-train-000/?span=1h").content.decode()
    util = re.search(r'<p class="chart-caption">GPU utilisation, 1h: (.*?)</p>', html, re.S)
    assert util is not None, "no utilisation chart"
    legend = util.group(1)
    # Eight GPUs, in order; GPU 0 runs at 20 %, the others at 80 % (the stack's overrides).
    keys = re.findall(r'class="chart-key chart-series-\d">GPU (\d+)</span>', legend)
    assert keys == [str(i) for i in range(8)]
    assert "GPU 0</span> min 20 % · avg 20 % · max 20 %" in legend
    assert "GPU 1</span> min 80 % · avg 80 % · max 80 %" in legend
    for chart in ("Framebuffer used", "GPU temperature", "Power", "Last XID error code"):
        assert f'<p class="chart-caption">{chart}, 1h: ' in html
