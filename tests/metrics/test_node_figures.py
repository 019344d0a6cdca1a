"""One refresher for the whole deployment: web processes that share the cache (Redis, as in
production) ask Prometheus once for every node's figures, however many ask at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.core.cache import cache

from pools.metrics.dcgm import metric_labels
from pools.metrics.node_figures import NodeFigureCache
from pools.metrics.queries import node_figure_queries
from pools.metrics.results import InstantResult
from tests.servers import PrometheusServer, RedisServer

ASKING = 8


@pytest.fixture
def shared_cache(settings, redis: RedisServer) -> Iterator[None]:  # type: ignore[no-untyped-def]
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{redis.port}/3",
        }
    }
    cache.clear()
    yield
    cache.clear()


def ask_at_once(caches: list[NodeFigureCache]) -> list[InstantResult]:
    """Each cache asks from its own thread, all released together. Django gives each thread
    its own cache connection, so the threads share nothing but Redis: as processes would."""
    start = threading.Barrier(len(caches))
    results: list[InstantResult] = []

    def ask(figures: NodeFigureCache) -> None:
        start.wait()
        results.append(figures.get()[0])

    threads = [threading.Thread(target=ask, args=(c,)) for c in caches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_processes_sharing_the_cache_ask_prometheus_once(
    shared_cache: None,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_URL = prometheus.url
    settings.METRICS_CACHE_SECONDS = 30
    one_round = len(node_figure_queries(metric_labels(), hot_celsius=85, idle_window="1h"))
    before = prometheus.query_count()
    results = ask_at_once([NodeFigureCache() for _ in range(ASKING)])
    assert len(results) == ASKING and all(r.available for r in results)
    assert prometheus.queries_since(before) == one_round
    # A process that comes later finds the figures in the cache and asks nothing.
    before = prometheus.query_count()
    NodeFigureCache().get()
    assert prometheus.queries_since(before) == 0


def test_without_a_cache_lifetime_every_ask_is_a_round(
    shared_cache: None,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    # METRICS_CACHE_SECONDS=0 keeps nothing: the lock only keeps the rounds apart.
    settings.PROMETHEUS_URL = prometheus.url
    settings.METRICS_CACHE_SECONDS = 0
    one_round = len(node_figure_queries(metric_labels(), hot_celsius=85, idle_window="1h"))
    before = prometheus.query_count()
    assert len(ask_at_once([NodeFigureCache() for _ in range(3)])) == 3
    assert prometheus.queries_since(before) == 3 * one_round
