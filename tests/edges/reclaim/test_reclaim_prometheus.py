"""Reclaim candidates and the teams' held-idle GPU-hours from a real Prometheus scraping
kubesim's DCGM exporter: the notebook pod on a GPU kept at 0 % is a candidate of the mixed
pool once its policy is on, the busy ones are not; its owner, contact and opt-out come from
its labels and annotations; the teams' view counts its GPU-hours; a Prometheus that cannot
answer is said, not guessed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client

from pools.inventory import inventory_sync
from pools.metrics.queries import idle_hours_query
from pools.models import AuditEvent, GpuPod
from tests.api.conftest import api
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, prometheus_server, wait_for

pytestmark = pytest.mark.django_db
IDLE_NODE = "a100-reserve-000"
BUSY_NODES = [f"a100-reserve-00{i}" for i in range(1, 9)]
POLICY = {"enabled": True, "below_percent": 5, "for_hours": 1, "grace_hours": 12}


def _scraped(prom: PrometheusServer, promql: str) -> bool:
    import json
    import urllib.parse
    import urllib.request

    url = f"{prom.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return bool(json.loads(answer.read())["data"]["result"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim")) as sim:
        sim.control("gpus", {"node": IDLE_NODE, "gpu": "all", "util": 0})
        for node in BUSY_NODES:
            sim.control("gpus", {"node": node, "gpu": "all", "util": 80})
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(tmp_path_factory.mktemp("prom"), scrape_targets=[target]) as prom:
            wait_for(
                lambda: _scraped(
                    prom, f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{IDLE_NODE}", exported_pod!=""}} == 0'
                ),
                timeout=60,
                what="the idle notebook's GPU to be scraped",
            )
            # The held-idle hours are counted in one-minute steps on whole minutes: the
            # first step after the first scrape.
            wait_for(
                lambda: _scraped(
                    prom, idle_hours_query("exported_pod", "exported_namespace", 7, 1)
                ),
                timeout=90,
                what="a whole minute of idle samples",
            )
            yield sim, prom


@pytest.fixture
def portal(stack, settings) -> Kubesim:  # type: ignore[no-untyped-def]
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.PROMETHEUS_TIMEOUT = 30
    settings.METRICS_CACHE_SECONDS = 0
    inventory_sync()
    return sim


def _idle_pod() -> GpuPod:
    return GpuPod.objects.live().get(node_name=IDLE_NODE, units__gt=0)


def test_the_idle_pod_is_a_candidate_once_the_policy_is_on(portal: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    viewer = api(token_for("viewers"))
    off = viewer.get("/api/v1/pools/mixed/reclaim/").json()
    assert off["policy"]["enabled"] is False and off["candidates"] == []

    admin = api(token_for("pool-admins", "paula"))
    saved = admin.put("/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json")
    assert saved.status_code == 200, saved.content
    assert AuditEvent.objects.filter(action="reclaim.policy_set").count() == 1

    pod = _idle_pod()
    body = viewer.get("/api/v1/pools/mixed/reclaim/").json()
    assert body["metrics_error"] is None
    (candidate,) = body["candidates"]
    assert (candidate["namespace"], candidate["pod"], candidate["node"]) == (
        pod.namespace,
        pod.name,
        IDLE_NODE,
    )
    assert candidate["units"] == pod.units == 1 and candidate["opted_out"] is False
    assert candidate["idle_hours"] >= 1 and candidate["gpu_hours"] == candidate["idle_hours"]

    page = Client()
    page.force_login(user_in("viewers", "vera"))
    html = page.get("/pools/mixed/reclaim/").content.decode()
    assert f'data-candidate="{pod.namespace}/{pod.name}"' in html


def test_the_owner_contact_and_opt_out_come_from_the_pod(portal: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    api(token_for("pool-admins", "paula")).put(
        "/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json"
    )
    pod = _idle_pod()
    portal.core().patch_namespaced_pod(
        pod.name,
        pod.namespace,
        {
            "metadata": {
                "annotations": {
                    "gpu-portal.io/contact": "research-gpus@example.com",
                    "gpu-portal.io/reclaim": "never",
                }
            }
        },
    )
    inventory_sync()
    (candidate,) = (
        api(token_for("viewers")).get("/api/v1/pools/mixed/reclaim/").json()["candidates"]
    )
    assert candidate["contact"] == "research-gpus@example.com" and candidate["opted_out"] is True
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    assert "data-opted-out" in page.get("/pools/mixed/reclaim/").content.decode()


def test_the_teams_held_idle_gpu_hours(portal: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    pod = _idle_pod()
    body = api(token_for("viewers")).get("/api/v1/teams/idle/").json()
    assert body["metrics_error"] is None
    team = pod.team or f"namespace {pod.namespace}"
    row = {t["team"]: t for t in body["teams"]}[team]
    assert 0 < row["gpu_hours_7d"] <= row["gpu_hours_30d"]
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    assert f'data-team="{team}"' in page.get("/insights/idle/").content.decode()


def test_a_prometheus_that_cannot_answer_is_said(portal: Kubesim, token_for, settings) -> None:  # type: ignore[no-untyped-def]
    api(token_for("pool-admins", "paula")).put(
        "/api/v1/pools/mixed/reclaim/", POLICY, content_type="application/json"
    )
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"
    body = api(token_for("viewers")).get("/api/v1/pools/mixed/reclaim/").json()
    assert body["candidates"] == [] and body["metrics_error"]
    teams = api(token_for("viewers")).get("/api/v1/teams/idle/").json()
    assert teams["teams"] == [] and teams["metrics_error"]


def test_the_demos_idle_embedders_are_candidates_of_inference(portal: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    """As `make demo` sets it up (demo_pools turns inference's policy on): the scenario's
    embedders hold a GPU each and do nothing (kubesim's `idle` load); the serving pods work."""
    from django.core.management import call_command

    call_command("demo_pools")
    body = api(token_for("viewers")).get("/api/v1/pools/inference/reclaim/").json()
    assert body["metrics_error"] is None
    embedders = GpuPod.objects.live().filter(pool_label="inference", name__startswith="embedder")
    assert len(embedders) == 5
    assert sorted((c["namespace"], c["pod"], c["node"]) for c in body["candidates"]) == sorted(
        (p.namespace, p.name, p.node_name) for p in embedders
    )
