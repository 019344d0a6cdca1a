"""Each pool's figures as a real Prometheus adds them up (rules.yml's gpu-pool-portal.pool
group) over the membership the portal exports at /metrics/pools: the same figures as adding
up every node's, in one PromQL query; and never over a membership that changed since."""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.test import Client

from pools.core.pool_sums import MEMBERSHIP_DIGEST, membership_digest
from pools.fleet import selectors
from pools.fleet.membership_export import membership
from pools.inventory import inventory_sync
from pools.models import Node, Pool
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, StaticPage, prometheus_server, static_page, wait_for

TOKEN = "a-scrape-token-of-length"


def scalar(url: str, promql: str) -> float | None:
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as response:
        result = json.loads(response.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else None


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("sim")) as server:
        yield server


@pytest.fixture(scope="module")
def served() -> Iterator[StaticPage]:
    with static_page() as server:
        yield server


@pytest.fixture(scope="module")
def second() -> Iterator[StaticPage]:
    """A second web pod's page: empty (no series) unless a test says otherwise."""
    with static_page() as server:
        yield server


@pytest.fixture(scope="module")
def prom(
    sim: Kubesim,
    served: StaticPage,
    second: StaticPage,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PrometheusServer]:
    with prometheus_server(
        tmp_path_factory.mktemp("prom"),
        scrape_targets=[sim.metrics_url.removeprefix("http://")],
        extra_targets={
            "portal-pools": f"127.0.0.1:{served.server_port}",
            "portal-pools-second-pod": f"127.0.0.1:{second.server_port}",
        },
    ) as server:
        yield server


@pytest.fixture(autouse=True)
def portal(settings, sim: Kubesim, prom: PrometheusServer) -> None:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.PROMETHEUS_TIMEOUT = 30  # what is read, not how fast (a loaded machine)
    settings.METRICS_CACHE_SECONDS = 0
    settings.METRICS_TOKEN = TOKEN
    cache.clear()


def export(served: StaticPage, prom: PrometheusServer) -> str:
    """What /metrics/pools answers now, handed to Prometheus; once its rules have summed
    over it, the digest they recorded (the membership's)."""
    answer = Client().get("/metrics/pools", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answer.status_code == 200
    served.body = answer.content
    digest = membership_digest(membership())
    stale = f'count({{__name__=~"portal_pool:.+", digest!="{digest}"}})'
    fresh = f'count({{__name__=~"portal_pool:.+", digest="{digest}"}})'
    wait_for(
        lambda: scalar(prom.url, stale) is None and scalar(prom.url, fresh),
        timeout=60,
        what="every pool rule over the exported membership",
    )
    return digest


def close(a: float | None, b: float | None, tolerance: float) -> bool:
    return (a is None and b is None) or math.isclose(a or 0.0, b or 0.0, abs_tol=tolerance)


def assert_same_figures(recorded: selectors.PoolFigureSet, per_node: selectors.PoolFigureSet):  # type: ignore[no-untyped-def]
    assert set(recorded.by_pool) == set(per_node.by_pool)
    for pool, mine in [*recorded.by_pool.items(), ("cluster", recorded.cluster)]:
        theirs = per_node.by_pool[pool] if pool != "cluster" else per_node.cluster
        counts = ("nodes", "gpus", "allocated", "xid_gpus", "hot_gpus", "nodes_without_metrics")
        assert [getattr(mine, c) for c in counts] == [getattr(theirs, c) for c in counts], pool
        assert mine.util_gpus == theirs.util_gpus, pool
        assert mine.idle_held_gpus == theirs.idle_held_gpus, pool
        # Gauges sampled a rule evaluation apart (a second) may move a little.
        assert close(mine.avg_util, theirs.avg_util, 5), pool
        assert close(mine.fb_total, theirs.fb_total, 1), pool
        assert close(mine.fb_used, theirs.fb_used, 0.1 * (theirs.fb_total or 1)), pool


@pytest.mark.django_db
def test_the_recorded_pool_figures_equal_the_sums_over_every_node(
    sim: Kubesim, served: StaticPage, prom: PrometheusServer
) -> None:
    inventory_sync()
    assert Node.objects.filter(pool__isnull=True).exists()  # the unassigned group too
    # An XID on one pooled node: a count the sums must carry, not only zeros.
    pooled = Node.objects.present().filter(pool__isnull=False).order_by("name").first()
    assert pooled is not None
    sim.control("gpus", {"node": pooled.name, "gpu": 3, "xid": 48})
    export(served, prom)
    wait_for(
        lambda: scalar(prom.url, "sum(portal_pool:DCGM_FI_DEV_XID_ERRORS:count_nonzero)"),
        timeout=60,
        what="the XID in the pool sums",
    )
    before = prom.query_count()
    overview = selectors.overview()
    # One query for every pool's figures, none for a node's.
    assert prom.queries_since(before) == 1
    assert overview.metrics_error is None
    recorded = selectors.recorded_pool_figure_set()
    assert recorded is not None
    _, metrics, per_node = selectors.pool_figure_set()
    assert len(metrics) > 10
    assert_same_figures(recorded, per_node)
    assert recorded.of(pooled.pool.name).xid_gpus >= 1
    assert overview.cluster.nodes == recorded.cluster.nodes
    assert recorded.cluster.nodes == Node.objects.present().count()


@pytest.mark.django_db
def test_a_move_since_the_scrape_is_never_summed_in_its_old_pool(
    sim: Kubesim, served: StaticPage, prom: PrometheusServer
) -> None:
    inventory_sync()
    export(served, prom)
    assert selectors.recorded_pool_figure_set() is not None
    # A node changes pools in the portal; Prometheus still has the old membership.
    node = Node.objects.present().filter(pool__isnull=False).first()
    assert node is not None
    other = Pool.objects.active().exclude(pk=node.pool_id).first()
    assert other is not None
    members = Node.objects.present().filter(pool=other).count()
    Node.objects.filter(pk=node.pk).update(pool=other)
    cache.clear()
    assert selectors.recorded_pool_figure_set() is None
    # The overview falls back to every node's figures: the node counts in its new pool,
    # with its figures.
    before = prom.query_count()
    overview = selectors.overview()
    assert prom.queries_since(before) > 1 and overview.metrics_error is None
    card = next(c for c in overview.cards if c.pool == other)
    assert card.figures.nodes == members + 1
    per_node = selectors.pool_figure_set()[2].of(other.name)
    assert card.figures.util_gpus == per_node.util_gpus
    # Once Prometheus has the new membership, its sums are used again.
    export(served, prom)
    cache.clear()
    recorded = selectors.recorded_pool_figure_set()
    assert recorded is not None
    assert_same_figures(recorded, selectors.pool_figure_set()[2])


def pool_rules_failing(prom: PrometheusServer) -> bool:
    with urllib.request.urlopen(f"{prom.url}/api/v1/rules", timeout=5) as response:
        groups = json.loads(response.read())["data"]["groups"]
    (pool,) = [g for g in groups if g["name"] == "gpu-pool-portal.pool"]
    sums = [rule for rule in pool["rules"] if rule["name"].startswith("portal_pool:")]
    return len(sums) == 8 and all(rule["health"] == "err" for rule in sums)


@pytest.mark.django_db
def test_two_web_pods_that_disagree_give_no_sums_until_they_agree(
    sim: Kubesim, served: StaticPage, second: StaticPage, prom: PrometheusServer
) -> None:
    inventory_sync()
    before = Client().get("/metrics/pools", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content
    try:
        second.body = before  # both pods scraped with one membership: they agree
        export(served, prom)
        # A move: one pod is scraped with the new membership, the other still has the old
        # (it never stops being scraped, so no evaluation sees the new one alone).
        node = Node.objects.present().filter(pool__isnull=False).first()
        assert node is not None
        other = Pool.objects.active().exclude(pk=node.pool_id).first()
        Node.objects.filter(pk=node.pk).update(pool=other)
        served.body = Client().get("/metrics/pools", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content
        wait_for(lambda: pool_rules_failing(prom), timeout=60, what="two memberships at once")
        cache.clear()
        # Whatever the rules last recorded was over the old membership: never used.
        assert selectors.recorded_pool_figure_set() is None
        second.body = served.body  # the second pod scraped again: they agree
        export(served, prom)
        cache.clear()
        assert selectors.recorded_pool_figure_set() is not None
    finally:
        second.body = b""


@pytest.mark.django_db
def test_the_membership_page_wants_the_token_and_names_every_present_node(
    sim: Kubesim, settings
) -> None:  # type: ignore[no-untyped-def]
    inventory_sync()
    assert Client().get("/metrics/pools").status_code == 401
    wrong = Client().get("/metrics/pools", HTTP_AUTHORIZATION="Bearer not-the-token-at-all")
    assert wrong.status_code == 401
    answer = Client().get("/metrics/pools", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    text = answer.content.decode()
    lines = [line for line in text.splitlines() if line.startswith("gpu_pool_portal_node_pool{")]
    assert len(lines) == Node.objects.present().count()
    pooled = Node.objects.present().filter(pool__isnull=False).select_related("pool").first()
    assert f'Hostname="{pooled.name}",portal_pool="{pooled.pool.name}"}} 1.0' in text
    loose = Node.objects.present().filter(pool__isnull=True).first()
    assert f'Hostname="{loose.name}",portal_pool=""}} 1.0' in text
    digest = membership_digest(membership())
    assert f'{MEMBERSHIP_DIGEST}{{digest="{digest}"}} 1.0' in text
    # A scrape naming its cluster, as each cluster's Prometheus does, leaves no session
    # behind (Prometheus keeps no cookie: one would be written every scrape).
    own = Client().get(
        "/metrics/pools",
        {"cluster": settings.CLUSTER_NAME},
        HTTP_AUTHORIZATION=f"Bearer {TOKEN}",
    )
    assert own.status_code == 200 and own.content == answer.content
    assert not Session.objects.exists()
    unknown = Client().get("/metrics/pools?cluster=nowhere", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert unknown.status_code == 404
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics/pools").status_code == 404


def test_the_chart_carries_the_same_pool_rules() -> None:
    root = Path(__file__).resolve().parents[3]
    mine = (root / "deploy/prometheus/rules.yml").read_text()
    assert "name: gpu-pool-portal.pool" in mine
    assert (root / "deploy/helm/gpu-pool-portal/files/rules.yml").read_text() == mine
