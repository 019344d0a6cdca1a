"""The insights' PromQL against a real Prometheus scraping kubesim's DCGM exporter: each
pool's utilisation and idle whole nodes a step (from the recording rules, and from the raw
series where the rules are not loaded: the same figures), XID errors a step, drivers; one
query per figure for every pool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client
from django.utils import timezone

from pools.core.membership import all_along
from pools.inventory import inventory_sync
from pools.metrics import insights as metrics
from pools.metrics.queries import Members
from pools.models import Node
from tests.api.conftest import api
from tests.edges.metrics.test_dashboard import scraped
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, prometheus_server, wait_for

Stack = tuple[Kubesim, PrometheusServer, bool]  # with the recording rules loaded?


@pytest.fixture(scope="module", params=["rules", "raw"])
def stack(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    rules = request.param == "rules"
    with kubesim_server(tmp_path_factory.mktemp("kubesim")) as sim:
        for i in range(4):
            sim.control("gpus", {"node": f"a100-train-00{i}", "gpu": "all", "util": 90})
        sim.control("gpus", {"node": "a100-train-drift-000", "gpu": "all", "util": 70})
        sim.control("gpus", {"node": "a100-infer-001", "gpu": 2, "xid": 79})
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(
            tmp_path_factory.mktemp("prom"), scrape_targets=[target], rules=rules
        ) as prom:
            # Seen two seconds ago too: the client rounds a range's end to the second, so
            # it can end before a scrape made within the last half second, and the raw
            # stack's only step with data (its first scrape) would fall outside.
            wait_for(
                lambda: scraped(
                    prom, 'avg(DCGM_FI_DEV_GPU_UTIL{Hostname=~"a100-train.*"} offset 2s)', 86
                ),
                timeout=30,
                what="the overrides to be scraped",
            )
            if rules:
                wait_for(
                    lambda: scraped(
                        prom,
                        'max(Hostname:DCGM_FI_DEV_GPU_UTIL:max{Hostname="a100-train-000"})',
                        90,
                    ),
                    timeout=60,
                    what="the recording rules to run",
                )
            yield sim, prom, rules


@pytest.fixture
def portal(stack: Stack, settings, db) -> Stack:  # type: ignore[no-untyped-def]
    sim, prom, _ = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    # What the figures say, not how fast: a loaded machine's Prometheus may take more than
    # the default 2 s, and a page past it shows "—" (that wait is tested on its own).
    settings.PROMETHEUS_TIMEOUT = 30
    inventory_sync()
    return stack


def by_pool() -> dict[str, Members]:
    """Each pool's nodes, in it all along."""
    pools: dict[str, list[str]] = {}
    for name, pool in Node.objects.present().values_list("name", "pool__name"):
        if pool:
            pools.setdefault(pool, []).append(name)
    return {pool: all_along(names) for pool, names in pools.items()}


def test_each_pool_gets_its_utilisation_and_idle_nodes_in_one_query_each(portal: Stack) -> None:
    _, prom, rules = portal
    sent_before = len(prom.queries_sent())
    span, step = metrics.window_span(7)
    series = metrics.pool_series(by_pool(), span=span, step=step)
    sent = prom.queries_sent()[sent_before:]
    recorded = [q for q in sent if "Hostname:DCGM_FI_DEV_GPU_UTIL:max" in q]
    if rules:
        # The rules' series answered; they began when this Prometheus did, so the raw series
        # are asked for the part of the window before (one query each).
        assert len(sent) == 4 and len(recorded) == 1
        assert sum("DCGM_FI_DEV_GPU_UTIL{" in q for q in sent) == 2
    else:
        assert len(sent) == 4 and len(recorded) == 1  # asked, empty: then the raw series
    assert series.error is None
    (_, training), *_ = reversed(series.average["training"])
    assert training == pytest.approx(86.0)
    assert set(series.average) == {"training", "inference", "mixed"}
    # The reserve pool's nodes are mostly free: whole nodes idle.
    assert series.idle_nodes["mixed"][-1][1] >= 1
    assert "training" not in series.idle_nodes


def test_xid_errors_and_drivers_come_per_node(portal: Stack) -> None:
    times, error = metrics.xid_times(days=7)
    assert error is None and list(times) == ["a100-infer-001"]
    drivers, error = metrics.node_drivers()
    assert error is None and drivers["a100-train-000"] == "550.54.15"


def test_the_pool_insights_api_reads_prometheus(portal: Stack, token_for) -> None:  # type: ignore[no-untyped-def]
    client: Client = api(token_for("viewers"))
    body = client.get("/api/v1/pools/training/insights/?days=7").json()
    u = body["utilisation"]
    assert u["metrics_error"] is None and u["samples"] >= 1
    assert u["average"] == pytest.approx(86.0)
    assert u["below_target"] is False
    checks = {c["name"]: c for c in body["readiness"]}
    assert checks["metrics"]["status"] == "pass"
    mixed = client.get("/api/v1/pools/mixed/insights/?days=7").json()
    metrics_check = next(c for c in mixed["readiness"] if c["name"] == "metrics")
    # The reserve node that is down has no exporter: it is not ready, so it is not counted.
    assert metrics_check["status"] == "pass", metrics_check


def test_a_not_ready_node_is_never_counted_an_idle_whole_node(portal: Stack) -> None:
    down = set(Node.objects.present().filter(ready=False).values_list("name", flat=True))
    assert down == {"a100-reserve-down-000"}  # its exporter still reports its GPUs at 0 %
    span, step = metrics.window_span(7)
    end = timezone.now()

    def both() -> tuple[metrics.PoolSeries, metrics.PoolSeries]:
        counted = metrics.pool_series(by_pool(), span=span, step=step, end=end)
        honest = metrics.pool_series(by_pool(), span=span, step=step, end=end, never_idle=down)
        return counted, honest

    # A scrape stamped before `end` may be stored after the first query (a second late on a
    # loaded machine): the pair is read again until the plain answer is the same before and
    # after it, so both were read over the same samples.
    for _ in range(5):
        counted, honest = both()
        again = metrics.pool_series(by_pool(), span=span, step=step, end=end)
        if again.average == counted.average and again.idle_nodes == counted.idle_nodes:
            break
    assert counted.error is None and honest.error is None
    last = counted.idle_nodes["mixed"][-1]
    assert (last[0], last[1] - 1) in honest.idle_nodes.get("mixed", []) or last[1] == 1
    # The average still weighs its GPUs: the same figure either way.
    assert [t for t, _ in honest.average["mixed"]] == [t for t, _ in counted.average["mixed"]]
    assert [v for _, v in honest.average["mixed"]] == pytest.approx(
        [v for _, v in counted.average["mixed"]]
    )
