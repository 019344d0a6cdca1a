"""The label that carries the node is a setting: per-node exporter targets whose Hostname is
the exporter pod (dcgm-exporter without NODE_NAME), the node arriving in kubernetes_node."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client

from pools.inventory import inventory_sync
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, prometheus_server, wait_for, wait_rules_caught_up


def count_series(prom: PrometheusServer, query: str) -> int:
    url = f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as response:
        result = json.loads(response.read())["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    work = tmp_path_factory.mktemp("per-node")
    targets = work / "targets.json"
    with (
        kubesim_server(
            work / "sim", extra=["--exporter-targets-file", str(targets), "--hostname-is-pod"]
        ) as sim,
        prometheus_server(work / "prom", file_sd=targets) as prom,
    ):
        wait_for(
            lambda: count_series(prom, "count(DCGM_FI_DEV_GPU_UTIL)") == 192,
            timeout=30,
            what="every node's target to be scraped",
        )
        yield sim, prom


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("node_label", "training_util_shown"), [("kubernetes_node", True), ("Hostname", False)]
)
def test_node_label_setting(
    stack,
    settings,
    node_label: str,  # type: ignore[no-untyped-def]
    training_util_shown: bool,
) -> None:
    sim, prom = stack
    assert (
        count_series(
            prom,
            "count(count by (Hostname) "
            '(DCGM_FI_DEV_GPU_UTIL{Hostname=~"nvidia-dcgm-exporter-.*"}))',
        )
        == 25
    )
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    settings.DCGM_NODE_LABEL = node_label
    inventory_sync()
    client = Client()
    client.force_login(User.objects.create_superuser("root"))
    html = client.get("/").content.decode()
    card = re.search(r'data-pool="training">(.*?)</article>', html, re.S).group(1)  # type: ignore[union-attr]
    util = re.search(r'data-figure="util">([^<]*)<', card).group(1).strip()  # type: ignore[union-attr]
    missing = re.search(r'data-figure="no-metrics">([^<]*)<', card).group(1)  # type: ignore[union-attr]
    if training_util_shown:
        assert util.endswith("%") and missing == "0 without metrics"
    else:
        # Hostname names the exporter pods here: no node matches, and the page says so.
        assert util == "—" and missing == "5 without metrics"


# --- exporters that name the label `hostname`, found without configuration ---


@pytest.fixture(scope="module")
def lower_case_stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    work = tmp_path_factory.mktemp("hostname")
    with kubesim_server(work / "sim", extra=["--hostname-label", "hostname"]) as sim:
        sim.control("gpus", {"node": "a100-train-001", "gpu": "all", "util": 80})
        sim.control("gpus", {"node": "a100-infer-002", "gpu": 1, "xid": 79})
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(work / "prom", scrape_targets=[target]) as prom:
            wait_for(
                lambda: count_series(prom, 'count(DCGM_FI_DEV_XID_ERRORS{err_code="79"})') == 1,
                timeout=30,
                what="the exporter to be scraped",
            )
            wait_rules_caught_up(prom)
            yield sim, prom


@pytest.mark.django_db
def test_lower_case_hostname_is_found_without_configuration(
    lower_case_stack,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    sim, prom = lower_case_stack
    assert count_series(prom, 'count(DCGM_FI_DEV_GPU_UTIL{Hostname!=""})') == 0
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    assert settings.DCGM_NODE_LABEL == "Hostname"  # the default, untouched
    inventory_sync()
    client = Client()
    client.force_login(User.objects.create_superuser("root"))
    html = client.get("/").content.decode()
    training = re.search(r'data-pool="training">(.*?)</article>', html, re.S).group(1)  # type: ignore[union-attr]
    assert re.search(r'data-figure="no-metrics">([^<]*)<', training).group(1) == "0 without metrics"  # type: ignore[union-attr]
    node = client.get("/nodes/a100-train-001/").content.decode()
    assert node.count('data-col="util">80 %<') == 8
    assert "ml-training/llm-pretrain-a100-train-001" in node  # the workload labels, per GPU


@pytest.mark.django_db
def test_node_page_names_the_xid(lower_case_stack, settings) -> None:  # type: ignore[no-untyped-def]
    sim, prom = lower_case_stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    inventory_sync()
    client = Client()
    client.force_login(User.objects.create_superuser("root"))
    html = client.get("/nodes/a100-infer-002/").content.decode()
    gpu1 = re.search(r'<tr data-gpu="1">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert '79 <span class="xid-meaning">GPU has fallen off the bus</span>' in gpu1
    gpu0 = re.search(r'<tr data-gpu="0">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert 'data-col="xid">0</td>' in gpu0
