"""The per-node figures from the recording rules (deploy/prometheus/rules.yml) where a
Prometheus has them, from the raw expressions where it has not: the same figures either
way, what was sent counted in each Prometheus' query log, and /readyz says which."""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from pools.core.figures import node_metrics_from_series
from pools.core.membership import all_along
from pools.inventory import inventory_sync
from pools.metrics import dcgm, queries, source
from pools.metrics.dcgm import metric_labels
from pools.metrics.node_figures import NodeFigureCache, figure_sources
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, prometheus_server, wait_for

FIGURES = list(queries.RECORDED)


def scalar(url: str, promql: str) -> float:
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as response:
        result = json.loads(response.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("sim")) as server:
        yield server


def scraping(sim: Kubesim, workdir: Path, *, rules: bool) -> Iterator[PrometheusServer]:
    target = sim.metrics_url.removeprefix("http://")
    with prometheus_server(workdir, scrape_targets=[target], rules=rules) as prom:
        wait_for(
            lambda: scalar(prom.url, "count(DCGM_FI_DEV_GPU_UTIL)") > 0,
            timeout=30,
            what="the first scrape",
        )
        if rules:
            # Every recorded figure, once the rules have run over a scrape.
            wait_for(
                lambda: all(
                    scalar(prom.url, f"count({name})") > 0 for name in queries.RECORDED.values()
                ),
                timeout=30,
                what="the recorded figures",
            )
        yield prom


@pytest.fixture(scope="module")
def with_rules(
    sim: Kubesim, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    yield from scraping(sim, tmp_path_factory.mktemp("with-rules"), rules=True)


@pytest.fixture(scope="module")
def without_rules(
    sim: Kubesim, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    yield from scraping(sim, tmp_path_factory.mktemp("without-rules"), rules=False)


@pytest.fixture(autouse=True)
def patient(settings) -> None:  # type: ignore[no-untyped-def]
    """What these tests read, not how fast: a loaded machine's Prometheus may take more
    than the default 2 s, and a page past it says "History unavailable" (a full run under
    load did). The wait itself is tested in test_prometheus_unavailable.py."""
    settings.PROMETHEUS_TIMEOUT = 30


def readyz_detail(settings) -> str:  # type: ignore[no-untyped-def]
    body = json.loads(Client().get("/readyz").content)
    return str(body["checks"]["prometheus"]["detail"])


@pytest.mark.django_db
def test_with_the_rules_the_figures_are_read_from_recorded_series(
    settings,  # type: ignore[no-untyped-def]
    with_rules: PrometheusServer,
) -> None:
    settings.PROMETHEUS_URL = with_rules.url
    settings.METRICS_CACHE_SECONDS = 30
    cache.clear()
    before = len(with_rules.queries_sent())
    result, metrics = NodeFigureCache().get()
    with_rules.queries_since(0)  # the log settles
    sent = with_rules.queries_sent()[before:]
    assert result.available and len(metrics) > 0
    # One query a figure, each a recorded series: no raw aggregation, no hour of samples.
    assert len(sent) == len(FIGURES)
    assert all(q.startswith("max by (Hostname) (Hostname:") for q in sent), sent
    assert not any("max_over_time" in q or "DCGM_FI_DEV_GPU_UTIL{" in q for q in sent)
    assert figure_sources() == dict.fromkeys(FIGURES, "recorded")
    assert readyz_detail(settings).endswith(
        "recording rules loaded; node figures from recorded series"
    )


@pytest.mark.django_db
def test_without_the_rules_the_figures_fall_back_to_raw_expressions(
    settings,  # type: ignore[no-untyped-def]
    without_rules: PrometheusServer,
) -> None:
    settings.PROMETHEUS_URL = without_rules.url
    settings.METRICS_CACHE_SECONDS = 0  # every ask is a round
    cache.clear()
    before = len(without_rules.queries_sent())
    result, metrics = NodeFigureCache().get()
    assert result.available and len(metrics) > 0
    # The first round tried the recorded series, found none, and asked the raw ones...
    without_rules.queries_since(0)
    first = without_rules.queries_sent()[before:]
    assert len(first) == 2 * len(FIGURES)
    assert sum("max_over_time(DCGM_FI_DEV_GPU_UTIL" in q for q in first) == 1
    # ...and later rounds go straight to the raw expressions.
    before = len(without_rules.queries_sent())
    NodeFigureCache().get()
    without_rules.queries_since(0)
    later = without_rules.queries_sent()[before:]
    assert len(later) == len(FIGURES)
    assert not any("(Hostname:" in q for q in later)
    assert figure_sources() is None or set(figure_sources().values()) == {"raw"}  # type: ignore[union-attr]
    settings.METRICS_CACHE_SECONDS = 30
    NodeFigureCache().get()
    assert figure_sources() == dict.fromkeys(FIGURES, "raw")
    assert readyz_detail(settings).endswith("no recording rules; node figures from raw expressions")


@pytest.mark.django_db
def test_a_threshold_the_rules_were_not_made_with_is_read_raw(
    settings,  # type: ignore[no-untyped-def]
    with_rules: PrometheusServer,
) -> None:
    settings.PROMETHEUS_URL = with_rules.url
    settings.METRICS_CACHE_SECONDS = 30
    settings.GPU_HOT_CELSIUS = 70.0  # the rules count GPUs over 85 °C
    cache.clear()
    NodeFigureCache().get()
    sources = figure_sources()
    assert sources is not None and sources.pop("hot_gpus") == "raw"
    assert set(sources.values()) == {"recorded"}
    assert readyz_detail(settings).endswith("node figures from recorded series, raw for hot_gpus")


@pytest.mark.django_db
def test_recorded_and_raw_figures_agree(
    settings,  # type: ignore[no-untyped-def]
    with_rules: PrometheusServer,
) -> None:
    settings.PROMETHEUS_URL = with_rules.url
    options = {"hot_celsius": 85.0, "idle_window": "1h"}
    raw = source.instant(queries.node_figure_queries(metric_labels(), **options), use_cache=False)
    recorded = source.instant(
        queries.recorded_figure_queries(metric_labels(), **options), use_cache=False
    )
    by_raw = node_metrics_from_series(raw.series, "Hostname")
    by_recorded = node_metrics_from_series(recorded.series, "Hostname")
    assert set(by_raw) == set(by_recorded) and len(by_raw) > 10
    assert sum(m.idle_held_gpus for m in by_raw.values()) > 0  # the scenario has some
    for node, m in by_raw.items():
        r = by_recorded[node]
        counts = ("gpus_reporting", "xid_gpus", "hot_gpus", "idle_held_gpus", "fb_total")
        assert [getattr(m, c) for c in counts] == [getattr(r, c) for c in counts], node
        # Gauges sampled a rule evaluation apart (one second) may move a little.
        assert math.isclose(m.util or 0, r.util or 0, abs_tol=5), node


@pytest.mark.django_db
def test_the_pool_history_reads_the_per_node_sums_where_the_rules_are_loaded_and_raw_before(
    settings,  # type: ignore[no-untyped-def]
    sim: Kubesim,
    with_rules: PrometheusServer,
    without_rules: PrometheusServer,
) -> None:
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.METRICS_CACHE_SECONDS = 30
    inventory_sync()
    session = Client()
    session.force_login(User.objects.create_superuser("root"))
    sent = {}
    for prom in (with_rules, without_rules):
        settings.PROMETHEUS_URL = prom.url
        cache.clear()
        before = len(prom.queries_sent())
        page = session.get("/pools/training/").content.decode()
        assert "History unavailable" not in page
        prom.queries_since(0)
        sent[prom.url] = [q for q in prom.queries_sent()[before:] if q.startswith(("sum(", "avg("))]
    # With the rules: their per-node sums, then the raw series for the part of the 24 h
    # before the rules' first point (this Prometheus started a minute ago). Without: raw.
    recorded, raw_before = sent[with_rules.url]
    assert recorded.startswith(f"sum({queries.RECORDED_UTIL_SUM}{{Hostname=~")
    assert raw_before.startswith("avg(")
    (raw,) = sent[without_rules.url]
    assert raw.startswith("avg(")


def test_the_recorded_history_is_the_gpu_weighted_average(
    settings,  # type: ignore[no-untyped-def]
    with_rules: PrometheusServer,
) -> None:
    settings.PROMETHEUS_URL = with_rules.url
    nodes = all_along([f"a100-train-{i:03d}" for i in range(4)] + ["a100-infer-000"])
    span, step = timedelta(seconds=20), timedelta(seconds=5)
    raw = dcgm.utilisation_history(nodes, span=span, step=step, recorded=False)
    recorded = dcgm.utilisation_history(nodes, span=span, step=step, recorded=True)
    assert raw.error is None and recorded.error is None and recorded.points
    by_time = dict(raw.points)
    for at, value in recorded.points:
        if at in by_time:  # a rule evaluation apart: the gauges may move a little
            assert math.isclose(value, by_time[at], abs_tol=5), at
