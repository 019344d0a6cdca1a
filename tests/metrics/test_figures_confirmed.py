"""On Redis, a web process asks for the node figures' version at most once a second: the
round trip is spared on the API's every request, and newer figures made by another process
(or a clear made by this one) still reach its pages within CONFIRMED_SECONDS."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis as redis_client
from django.core.cache import cache

from pools.guarded_cache import caches_setting
from pools.metrics.node_figures import CONFIRMED_SECONDS, REFRESH_AHEAD_AT, NodeFigureCache
from tests.servers import PrometheusServer, RedisServer


@pytest.fixture
def redis_cache(settings, redis: RedisServer) -> Iterator[redis_client.Redis]:  # type: ignore[no-untyped-def]
    settings.CACHES = caches_setting(f"redis://127.0.0.1:{redis.port}/4")
    cache.clear()
    yield redis_client.Redis(port=redis.port)
    cache.clear()


def gets(server: redis_client.Redis) -> int:
    return int(server.info("commandstats").get("cmdstat_get", {}).get("calls", 0))


def test_the_version_is_asked_once_a_second_not_once_a_request(
    redis_cache: redis_client.Redis,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_URL = prometheus.url
    settings.METRICS_CACHE_SECONDS = 30
    figures = NodeFigureCache()
    first = figures.get_versioned()[2]
    figures.get_versioned()  # found current in the shared cache
    before = gets(redis_cache)
    assert all(figures.get_versioned()[2] == first for _ in range(50))
    assert gets(redis_cache) - before <= 1  # was 50: one a request
    time.sleep(CONFIRMED_SECONDS)
    before = gets(redis_cache)
    assert figures.get_versioned()[2] == first
    assert gets(redis_cache) - before == 1  # asked again, and still current


def test_newer_figures_and_a_clear_reach_the_process_within_the_second(
    redis_cache: redis_client.Redis,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_URL = prometheus.url
    settings.METRICS_CACHE_SECONDS = 30
    figures = NodeFigureCache()
    first = figures.get_versioned()[2]
    figures.get_versioned()
    # Another process, whose refresh stores newer figures.
    other = NodeFigureCache()
    newer = other._refresh(*other._keys())[0]
    assert newer != first
    deadline = time.monotonic() + CONFIRMED_SECONDS + 2
    while figures.get_versioned()[2] != newer and time.monotonic() < deadline:
        time.sleep(0.05)
    assert figures.get_versioned()[2] == newer
    # A clear in this process: the next ask goes to Redis, finds nothing, and refreshes.
    cache.clear()
    assert figures.get_versioned()[2] not in (first, newer)


def test_figures_due_for_their_refresh_are_asked_for_again(
    redis_cache: redis_client.Redis,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    """Past the refresh-ahead point another process may store newer figures at any moment:
    a process that confirmed its figures a moment before takes the newer ones, instead of
    serving its own and starting a second refresh."""
    settings.PROMETHEUS_URL = prometheus.url
    settings.METRICS_CACHE_SECONDS = 4
    made = NodeFigureCache().get_versioned()[2]  # another process made them
    due = made + REFRESH_AHEAD_AT * 4

    def wait_until(moment: float) -> None:
        time.sleep(max(0.0, moment - time.time()))

    figures = NodeFigureCache()
    wait_until(due - 0.5)
    assert figures.get_versioned()[2] == made  # found current, confirmed
    wait_until(due + 0.1)
    other = NodeFigureCache()
    newer = other._refresh(*other._keys())[0]  # the other process's refresh ahead
    before = prometheus.query_count()
    assert figures.get_versioned()[2] == newer
    time.sleep(0.3)  # a refresh of its own would have asked by now
    assert prometheus.queries_since(before) == 0
