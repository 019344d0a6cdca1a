"""A querier holding two clusters' series, as Thanos, Mimir or VictoriaMetrics serve them: each
cluster's own Prometheus scrapes its exporter and evaluates the recording rules, and attaches
an external `cluster` label to what it hands on; a third Prometheus federates both. The two
simulated clusters have the same node names, so a query that does not select its cluster
mixes them. A portal told its cluster's label (PROMETHEUS_CLUSTER_LABEL) shows its own figures
only, from the recorded series, at the same number of queries as on its own Prometheus."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from pools.inventory import inventory_sync
from pools.models import Pool
from portal.readiness import figures_detail
from tests.edges.metrics.test_dashboard import promql
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import role_group
from tests.overview_html import card, figure
from tests.servers import PrometheusServer, prometheus_server, wait_for

TRAINING = [f"a100-train-00{i}" for i in range(4)] + ["a100-train-drift-000"]
# Every training GPU's utilisation in each cluster, and an XID in us-east only.
UTIL = {"eu-west": 30, "us-east": 80}


@dataclass
class Fleet:
    sims: dict[str, Kubesim]
    leaves: dict[str, PrometheusServer]
    querier: PrometheusServer


def holds(prom: PrometheusServer, query: str, expected: float) -> bool:
    result = promql(prom, query)
    return len(result) == 1 and abs(float(result[0]["value"][1]) - expected) < 1e-6


def federated(querier: PrometheusServer) -> bool:
    """Both clusters' raw and recorded series, with the overrides, reached the querier."""
    for cluster, util in UTIL.items():
        raw = f'avg(DCGM_FI_DEV_GPU_UTIL{{cluster="{cluster}", Hostname=~"a100-train.*"}})'
        node = f'cluster="{cluster}", Hostname="{TRAINING[0]}"'
        recorded = f"Hostname:DCGM_FI_DEV_GPU_UTIL:avg{{{node}}}"
        if not (holds(querier, raw, util) and holds(querier, recorded, util)):
            return False
    xids = 'Hostname:DCGM_FI_DEV_XID_ERRORS:count_nonzero{cluster="us-east"} > 0'
    return len(promql(querier, xids)) == 1


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with (
        kubesim_server(tmp_path_factory.mktemp("eu-west")) as eu,
        kubesim_server(tmp_path_factory.mktemp("us-east")) as us,
    ):
        sims = {"eu-west": eu, "us-east": us}
        for cluster, sim in sims.items():
            for node in TRAINING:
                sim.control("gpus", {"node": node, "gpu": "all", "util": UTIL[cluster]})
        us.control("gpus", {"node": "a100-infer-001", "gpu": 2, "xid": 79})
        with (
            prometheus_server(
                tmp_path_factory.mktemp("prom-eu"),
                scrape_targets=[eu.metrics_url.removeprefix("http://")],
                external_labels={"cluster": "eu-west"},
            ) as leaf_eu,
            prometheus_server(
                tmp_path_factory.mktemp("prom-us"),
                scrape_targets=[us.metrics_url.removeprefix("http://")],
                external_labels={"cluster": "us-east"},
            ) as leaf_us,
            prometheus_server(
                tmp_path_factory.mktemp("querier"),
                rules=False,  # the rules are each cluster's, evaluated where it is scraped
                federate=[p.url.removeprefix("http://") for p in (leaf_eu, leaf_us)],
            ) as querier,
        ):
            wait_for(lambda: federated(querier), timeout=60, what="both clusters federated")
            yield Fleet(sims, {"eu-west": leaf_eu, "us-east": leaf_us}, querier)


def portal_of(fleet: Fleet, cluster: str, settings, *, label: str = "cluster") -> Client:  # type: ignore[no-untyped-def]
    """The portal of `cluster`, its metrics from the querier (label "": not narrowed)."""
    settings.CLUSTER_NAME = cluster
    # Its own database: the default pools are its cluster's, as its migration made them.
    Pool.everywhere.update(cluster=cluster)
    settings.KUBECONFIG = str(fleet.sims[cluster].kubeconfig)
    settings.PROMETHEUS_URL = fleet.querier.url
    settings.PROMETHEUS_CLUSTER_LABEL = label
    settings.PROMETHEUS_CLUSTER_VALUE = cluster if label else ""
    settings.METRICS_CACHE_SECONDS = 30  # kept, so that readiness can say where they came from
    cache.clear()
    settings.PROMETHEUS_TIMEOUT = 30  # what the figures say, not how fast
    inventory_sync()
    client = Client()
    viewer, _ = User.objects.get_or_create(username="vera")
    viewer.groups.add(role_group("viewers"))
    client.force_login(viewer)
    return client


def node_util(html: str, node: str) -> str:
    row = re.search(rf'<tr data-node="{node}">(.*?)</tr>', html, re.S)
    assert row, f"no row for {node}"
    cell = re.search(r'data-col="util">([^<]*)<', row.group(1))
    assert cell, f"no utilisation for {node}"
    return cell.group(1).strip()


@pytest.mark.django_db
@pytest.mark.parametrize("cluster", ["eu-west", "us-east"])
def test_each_clusters_portal_shows_its_own_figures(fleet: Fleet, settings, cluster: str) -> None:  # type: ignore[no-untyped-def]
    portal = portal_of(fleet, cluster, settings)
    html = portal.get("/").content.decode()
    assert "Metrics unavailable" not in html
    assert figure(card(html, "training"), "util") == f"{UTIL[cluster]:.1f} %"
    xids = figure(card(html, "inference"), "xid")
    assert xids == ("1 XID" if cluster == "us-east" else "0 XID")
    pool_page = portal.get("/pools/training/").content.decode()
    assert node_util(pool_page, TRAINING[0]) == f"{UTIL[cluster]} %"
    # Each cluster's rules were evaluated where it is scraped; the portal read what they
    # recorded, through the querier.
    assert figures_detail() == "recording rules loaded; node figures from recorded series"


@pytest.mark.django_db
def test_a_portal_not_told_its_label_mixes_the_clusters(fleet: Fleet, settings) -> None:  # type: ignore[no-untyped-def]
    """What the label is for: the same page without it shows the other cluster's figures."""
    html = portal_of(fleet, "eu-west", settings, label="").get("/").content.decode()
    assert figure(card(html, "training"), "util") != f"{UTIL['eu-west']:.1f} %"
    assert figure(card(html, "inference"), "xid") == "1 XID"  # us-east's


@pytest.mark.django_db
def test_the_querier_gets_the_queries_the_clusters_own_prometheus_would(  # type: ignore[no-untyped-def]
    fleet: Fleet, settings
) -> None:
    """Narrowing adds no query: the dashboard asks the querier as many as it asks its own
    cluster's Prometheus, and every one selects the cluster."""
    portal = portal_of(fleet, "eu-west", settings)
    querier = fleet.querier
    before = querier.settled_count()
    assert portal.get("/").status_code == 200
    asked = querier.queries_since(before)
    sent = querier.queries_sent()[before : before + asked]
    assert asked > 0 and all('cluster="eu-west"' in q for q in sent), sent
    own = fleet.leaves["eu-west"]
    settings.PROMETHEUS_URL = own.url
    settings.PROMETHEUS_CLUSTER_LABEL = settings.PROMETHEUS_CLUSTER_VALUE = ""
    before_own = own.settled_count()
    assert portal.get("/").status_code == 200
    assert own.queries_since(before_own) == asked


def one_portal_for_both(fleet: Fleet, settings, *, querier: bool) -> Client:  # type: ignore[no-untyped-def]
    """One portal serving both clusters: eu-west its own, us-east a further one; each
    cluster's figures from its own Prometheus, or both from the querier by their label."""
    from pools.core.cluster_scope import cluster_scope
    from pools.core.clusters import ClusterAccess, PrometheusAccess
    from pools.fleet.services import pools_copy

    portal = portal_of(fleet, "eu-west", settings, label="cluster" if querier else "")
    if not querier:
        settings.PROMETHEUS_URL = fleet.leaves["eu-west"].url
    url = fleet.querier.url if querier else fleet.leaves["us-east"].url
    label = "cluster" if querier else ""
    settings.OTHER_CLUSTERS = {
        "us-east": ClusterAccess(
            "us-east",
            kubeconfig=str(fleet.sims["us-east"].kubeconfig),
            prometheus=PrometheusAccess(
                url=url, cluster_label=label, cluster_value="us-east" if querier else ""
            ),
        )
    }
    pools_copy(source="eu-west", target="us-east")
    with cluster_scope("us-east"):
        inventory_sync()
    cache.clear()
    return portal


@pytest.mark.django_db
@pytest.mark.parametrize("querier", [False, True], ids=["two-prometheus", "one-querier"])
def test_one_portal_shows_each_clusters_figures_from_where_they_are(  # type: ignore[no-untyped-def]
    fleet: Fleet, settings, querier: bool
) -> None:
    portal = one_portal_for_both(fleet, settings, querier=querier)
    servers = [fleet.querier] if querier else list(fleet.leaves.values())
    before = [s.settled_count() for s in servers]
    for cluster in ("eu-west", "us-east"):
        html = portal.get("/", {"cluster": cluster}).content.decode()
        assert "Metrics unavailable" not in html, cluster
        assert figure(card(html, "training"), "util") == f"{UTIL[cluster]:.1f} %", cluster
        xids = figure(card(html, "inference"), "xid")
        assert xids == ("1 XID" if cluster == "us-east" else "0 XID"), cluster
    asked = [s.queries_since(b) for s, b in zip(servers, before, strict=True)]
    if not querier:
        # Each cluster's page asked its own Prometheus only, as many queries each.
        assert asked[0] == asked[1] > 0
    else:
        sent = fleet.querier.queries_sent()[before[0] : before[0] + asked[0]]
        assert sum('cluster="us-east"' in q for q in sent) == asked[0] // 2, sent
