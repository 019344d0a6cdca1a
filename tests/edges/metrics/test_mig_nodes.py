"""MIG nodes on kubesim's `mig` scenario with a real Prometheus: two A100 nodes split into
56 1g.10gb instances each (single strategy) beside a node of 8 whole GPUs. Their instances
report no DCGM_FI_DEV_GPU_UTIL: utilisation is their engine activity. The pages count 8
physical GPUs and 56 MIG instances, never 56 GPUs, and read every instance's figures, from
the recording rules and from the raw series alike, with the same number of queries."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client

from pools.core.insights import readiness
from pools.insights.gather import nodes_now
from pools.inventory import inventory_sync
from pools.metrics.insights import COUNTERS
from pools.models import Node
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, prometheus_server, wait_for, wait_rules_caught_up

MIG_NODE = "a100-mig-000"
WHOLE_NODE = "a100-whole-000"


def instances_reporting(prom: PrometheusServer) -> int:
    query = urllib.parse.urlencode({"query": 'count(DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID!=""})'})
    with urllib.request.urlopen(f"{prom.url}/api/v1/query?{query}", timeout=5) as response:
        found = json.loads(response.read())["data"]["result"]
    return int(float(found[0]["value"][1])) if found else 0


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Kubesim, PrometheusServer, PrometheusServer]]:
    """The cluster, a Prometheus with the portal's recording rules and one without."""
    work = tmp_path_factory.mktemp("mig-nodes")
    with kubesim_server(work / "sim", scenario="mig") as sim:
        target = sim.metrics_url.removeprefix("http://")
        with (
            prometheus_server(work / "rules", scrape_targets=[target]) as with_rules,
            prometheus_server(work / "raw", scrape_targets=[target], rules=False) as raw,
        ):
            for prom in (with_rules, raw):
                wait_for(lambda p=prom: instances_reporting(p) == 112, timeout=30, what="scrape")
            wait_rules_caught_up(with_rules)
            yield sim, with_rules, raw


@pytest.fixture
def portal(stack, settings, request):  # type: ignore[no-untyped-def]
    sim, with_rules, raw = stack
    prom = with_rules if request.param == "rules" else raw
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    inventory_sync()
    client = Client()
    client.force_login(User.objects.create_superuser("root"))
    return client, prom


BOTH = pytest.mark.parametrize("portal", ["rules", "raw"], indirect=True)


@pytest.mark.django_db
@BOTH
def test_the_inventory_counts_gpus_and_instances_apart(portal) -> None:  # type: ignore[no-untyped-def]
    mig = Node.objects.get(name=MIG_NODE)
    assert (mig.gpu_count, mig.gpu_allocatable, mig.gpu_allocated) == (8, 56, 3)
    assert mig.devices["gpus"] == 8 and mig.devices["mig_gpus"] == 8
    assert mig.devices["units"] == [["mig", "nvidia.com/gpu", "1g.10gb", "", 1, 56]]
    whole = Node.objects.get(name=WHOLE_NODE)
    assert (whole.gpu_count, whole.devices) == (8, {})


@pytest.mark.django_db
@BOTH
def test_a_mig_nodes_page_shows_its_gpus_and_every_instance(portal) -> None:  # type: ignore[no-untyped-def]
    client, _ = portal
    html = client.get(f"/nodes/{MIG_NODE}/").content.decode()
    assert re.search(r'data-figure="physical-gpus">8<', html)
    kind = re.search(r'<tr data-kind="MIG 1g.10gb">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert 'data-col="allocatable">56<' in kind and 'data-col="allocated">3<' in kind
    assert 'data-col="free">53<' in kind
    rows = re.findall(r'<tr data-gpu="(\d+ instance \d+)"><td>[^<]*<span[^>]*>1g\.10gb<', html)
    assert len(rows) == 56 and rows[0] == "0 instance 7"
    utils = re.findall(r'data-gpu="\d+ instance \d+">.*?data-col="util">([^<]*)<', html)
    assert len(utils) == 56 and all(u.strip().endswith("%") for u in utils)
    assert "No DCGM metrics arrive" not in html


@pytest.mark.django_db
@BOTH
def test_the_pool_counts_physical_gpus_whole_gpus_and_instances(portal) -> None:  # type: ignore[no-untyped-def]
    client, _ = portal
    html = client.get("/").content.decode()
    card = re.search(r'data-pool="inference">(.*?)</article>', html, re.S).group(1)  # type: ignore[union-attr]

    def figure(name: str, within: str = card) -> str:
        return re.search(rf'data-figure="{name}">([^<]*)<', within).group(1).strip()  # type: ignore[union-attr]

    # Three nodes of 8 GPUs: 8 whole, 16 split into 112 instances; the scenario's pods hold
    # 3 instances on each MIG node and 2 whole GPUs.
    assert figure("physical-gpus") == "24"
    assert figure("gpus") == "8" and figure("allocated") == "2"
    mig = re.search(r'data-kind="MIG 1g.10gb">(.*?)</div>', card, re.S).group(1)  # type: ignore[union-attr]
    assert figure("units", mig) == "112" and figure("units-allocated", mig) == "6"
    assert figure("units-largest-free-block", mig) == "53"
    assert figure("units-whole-free-nodes", mig) == "0"
    assert figure("no-metrics") == "0 without metrics"
    assert figure("util").endswith("%")


@pytest.mark.django_db
@BOTH
def test_readiness_expects_each_instance_to_report(portal) -> None:  # type: ignore[no-untyped-def]
    now = nodes_now()
    by_name = {n.name: n for n in now.facts}
    assert by_name[MIG_NODE].reporting_devices == 56 and by_name[MIG_NODE].mig
    assert by_name[WHOLE_NODE].reporting_devices == 8
    check = readiness.metrics_arrive(now.facts, now.metrics_error, COUNTERS)
    assert check.status == readiness.Status.PASS, check


@pytest.mark.django_db
@BOTH
def test_the_api_gives_the_devices_and_each_instances_figures(portal) -> None:  # type: ignore[no-untyped-def]
    client, _ = portal
    body = client.get(f"/api/v1/nodes/{MIG_NODE}/").json()
    devices = body["devices"]
    assert (devices["gpus"], devices["mig_gpus"], devices["model"]) == (
        8,
        8,
        "NVIDIA-A100-SXM4-80GB",
    )
    [units] = devices["units"]
    assert (units["kind"], units["profile"], units["allocatable"], units["free"]) == (
        "mig",
        "1g.10gb",
        56,
        53,
    )
    assert devices["operator"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert len(body["gpus"]) == 56 and {g["profile"] for g in body["gpus"]} == {"1g.10gb"}
    assert all(g["util"] is not None for g in body["gpus"])
    listed = client.get("/api/v1/nodes/", {"search": "a100"}).json()["results"]
    assert {n["name"]: n["devices"]["gpus"] for n in listed} == {
        "a100-mig-000": 8,
        "a100-mig-001": 8,
        WHOLE_NODE: 8,
    }
    response = client.get("/export/nodes.csv")
    csv = b"".join(response.streaming_content).decode().splitlines()
    header, *rows = [line.split(",") for line in csv]
    mig_row = dict(zip(header, next(r for r in rows if r[0] == MIG_NODE), strict=True))
    assert mig_row["gpus"] == "0" and mig_row["physical_gpus"] == "8"
    assert mig_row["other_units"] == "3/56 MIG 1g.10gb"


@pytest.mark.django_db
@BOTH
def test_a_mig_nodes_page_asks_as_many_queries_as_a_whole_nodes(portal) -> None:  # type: ignore[no-untyped-def]
    client, prom = portal
    counts = []
    for name in (WHOLE_NODE, MIG_NODE):
        client.get(f"/nodes/{name}/")  # the shared node figures, asked once for both
        before = prom.query_count()
        assert client.get(f"/nodes/{name}/").status_code == 200
        counts.append(prom.queries_since(before))
    assert counts[0] == counts[1] > 0


@pytest.mark.django_db
@BOTH
def test_the_insights_of_a_mig_pool_read_its_instances(portal) -> None:  # type: ignore[no-untyped-def]
    client, _ = portal
    body = client.get("/api/v1/pools/inference/insights/?days=7").json()
    utilisation = body["utilisation"]
    assert utilisation["metrics_error"] is None
    # Read from the MIG instances' engine activity as from the whole GPUs' utilisation.
    assert utilisation["samples"] > 0 and utilisation["average"] is not None
    checks = {c["name"]: c for c in body["readiness"]}
    assert checks["metrics"]["status"] == "pass", checks["metrics"]


@pytest.mark.django_db
@BOTH
def test_a_pool_page_asked_again_within_its_step_asks_prometheus_nothing(
    portal,  # type: ignore[no-untyped-def]
    settings,  # type: ignore[no-untyped-def]
) -> None:
    # The chart's range ends on a step's boundary (three hours at 30 days), so a page asked
    # again within the step finds its history, like its figures, in the metrics cache.
    client, prom = portal
    settings.METRICS_CACHE_SECONDS = 600
    assert client.get("/pools/inference/?span=30d").status_code == 200
    before = prom.query_count()
    assert client.get("/pools/inference/?span=30d").status_code == 200
    assert prom.queries_since(before) == 0
