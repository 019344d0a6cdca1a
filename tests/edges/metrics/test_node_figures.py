"""One refresher for the whole deployment: web processes that share the cache (Redis, as in
production) ask Prometheus once for every node's figures, however many ask at once."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest
from django.core.cache import cache

from pools.core.cluster_scope import cluster_scope
from pools.core.clusters import ClusterAccess, PrometheusAccess
from pools.metrics import node_figures
from pools.metrics.dcgm import metric_labels
from pools.metrics.node_figures import REFRESH_AHEAD_AT, NodeFigureCache
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


class CountingPrometheus(http.server.ThreadingHTTPServer):
    """Answers every instant query with an empty vector, counting how many it is answering
    at once: how the portal spreads its queries, which a real Prometheus answering in a
    millisecond does not show.

    What it counts does not depend on the machine's load. While `hold` is set, it keeps
    each answer until a second query is in (at most HOLD_SECONDS), so queries asked at once
    are seen at once however slowly their threads start; and a query stops counting before
    its answer is sent, so queries asked one after another are never seen together, however
    slowly the server's threads finish."""

    HOLD_SECONDS = 10.0

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.busy = self.most = self.answered = 0
        self.hold = True
        self.gate = threading.Event()  # answers wait while it is clear
        self.gate.set()
        super().__init__(("127.0.0.1", 0), _Answer)

    def most_at_once(self) -> int:
        with self.lock:
            most, self.most = self.most, 0
            return most


class _Answer(http.server.BaseHTTPRequestHandler):
    server: CountingPrometheus

    def do_GET(self) -> None:
        server = self.server
        server.gate.wait(timeout=120)
        with server.lock:
            server.busy += 1
            server.most = max(server.most, server.busy)
            server.lock.notify_all()
            if server.hold:
                server.lock.wait_for(lambda: server.most > 1, timeout=server.HOLD_SECONDS)
            server.busy -= 1
            server.answered += 1
        body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def counting() -> Iterator[CountingPrometheus]:
    server = CountingPrometheus()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


class _Clock:
    """The time module, `ahead` seconds later (what the figures' age is read with)."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead
        self.monotonic = time.monotonic
        self.sleep = time.sleep

    def time(self) -> float:
        return time.time() + self.ahead


def test_a_page_asks_at_once_and_the_refresh_ahead_one_after_another(
    shared_cache: None,
    counting: CountingPrometheus,
    settings,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A page waiting for the figures asks every query at once; nobody waits for a refresh
    ahead, which asks them one after another, leaving the machine's other cores to the
    pages when Prometheus shares it."""
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{counting.server_port}"
    settings.PROMETHEUS_TIMEOUT = 30  # the page's wait: the held answers come well within it
    settings.METRICS_CACHE_SECONDS = 60
    one_round = len(node_figure_queries(metric_labels(), hot_celsius=85, idle_window="1h"))
    figures = NodeFigureCache()
    first = figures.get_versioned()[2]
    # Empty answers: no recorded series, so a second round asks the raw expressions (and
    # later rounds go straight to them). Asked in turn, no query would ever meet another.
    assert counting.most_at_once() > 1 and counting.answered == 2 * one_round
    counting.hold = False
    # The figures' clock moved past the head start, still within their lifetime: no sleep
    # whose length a loaded machine could stretch past the lifetime.
    clock = _Clock(REFRESH_AHEAD_AT * settings.METRICS_CACHE_SECONDS + 1)
    monkeypatch.setattr(node_figures, "time", clock)
    assert figures.get_versioned()[2] == first  # served at once; the refresh runs behind
    hung = time.monotonic() + 120  # only against a refresh that never comes
    while figures.get_versioned()[2] == first and time.monotonic() < hung:
        time.sleep(0.05)  # the refresh's end, however long the machine takes
    assert counting.answered == 3 * one_round
    assert counting.most_at_once() == 1


def _first_figures(  # type: ignore[no-untyped-def]
    counting: CountingPrometheus, settings, life: int = 60
) -> tuple[NodeFigureCache, float]:
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{counting.server_port}"
    settings.PROMETHEUS_TIMEOUT = 30
    settings.METRICS_CACHE_SECONDS = life
    counting.hold = False
    figures = NodeFigureCache()
    return figures, figures.get_versioned()[2]


def test_figures_past_their_life_are_served_while_their_refresh_runs(
    shared_cache: None,
    counting: CountingPrometheus,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    """Within METRICS_STALE_SECONDS past their life, the last figures answer at once while
    their refresh runs: a refresh slower than the figures' last 30 % holds no page."""
    settings.METRICS_STALE_SECONDS = 60
    # A life of one second, on the real clock and Redis's.
    figures, first = _first_figures(counting, settings, life=1)
    settings.PROMETHEUS_TIMEOUT = 2  # a page that waited would get "did not answer"
    answered = counting.answered
    while time.time() - first <= 1.5:  # past its life, however long the sleep takes
        time.sleep(0.1)
    counting.most_at_once()  # counted from here
    counting.hold = True  # queries asked at once are seen at once
    counting.gate.clear()  # Prometheus answers nothing until the test says so
    try:
        # Returns although no answer can come: the page did not wait for the refresh.
        assert figures.get_versioned()[2] == first
        assert NodeFigureCache().get_versioned()[2] == first  # another process alike
    finally:
        counting.gate.set()
    hung = time.monotonic() + 120  # only against a refresh that never comes
    while figures.get_versioned()[2] == first and time.monotonic() < hung:
        time.sleep(0.05)
    assert figures.get_versioned()[2] > first
    # Late, the refresh asked at once, as a waiting page would: in turn it would have
    # kept the grace going for a whole round of one query after another.
    assert counting.most_at_once() > 1
    # One refresh for both, whoever asked first.
    one_round = len(node_figure_queries(metric_labels(), hot_celsius=85, idle_window="1h"))
    assert counting.answered - answered == one_round


@pytest.mark.parametrize("stale_seconds", [0, 60])
def test_figures_past_the_grace_are_never_served(
    shared_cache: None,
    counting: CountingPrometheus,
    settings,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
    stale_seconds: int,
) -> None:
    """Past their life and the grace (none with METRICS_STALE_SECONDS=0), the page waits for
    new figures: old ones are not shown, in this process or any other."""
    settings.METRICS_STALE_SECONDS = stale_seconds
    figures, first = _first_figures(counting, settings)
    ahead = settings.METRICS_CACHE_SECONDS + stale_seconds + 1
    monkeypatch.setattr(node_figures, "time", _Clock(ahead))
    # No background refresh to wait for: this call asked a whole round itself, and what it
    # returns is that round's, never the old figures.
    asked = counting.answered
    assert figures.get_versioned()[2] > first
    one_round = len(node_figure_queries(metric_labels(), hot_celsius=85, idle_window="1h"))
    assert counting.answered - asked == one_round
    assert NodeFigureCache().get_versioned()[2] > first  # nor in another process


def test_a_refresh_ahead_asks_its_own_clusters_prometheus(
    shared_cache: None,
    counting: CountingPrometheus,
    settings,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refresh ahead runs in a thread of its own, outside the request's cluster scope: it
    asks the cluster whose figures it refreshes, never the portal's own."""
    home = CountingPrometheus()
    threading.Thread(target=home.serve_forever, daemon=True).start()
    try:
        settings.PROMETHEUS_URL = f"http://127.0.0.1:{home.server_port}"
        settings.OTHER_CLUSTERS = {
            "east": ClusterAccess(
                "east",
                prometheus=PrometheusAccess(url=f"http://127.0.0.1:{counting.server_port}"),
            )
        }
        settings.PROMETHEUS_TIMEOUT = 30
        settings.METRICS_CACHE_SECONDS = 60
        counting.hold = home.hold = False
        with cluster_scope("east"):
            figures = NodeFigureCache()
            first = figures.get_versioned()[2]
            asked = counting.answered
            clock = _Clock(REFRESH_AHEAD_AT * settings.METRICS_CACHE_SECONDS + 1)
            monkeypatch.setattr(node_figures, "time", clock)
            assert figures.get_versioned()[2] == first  # the refresh runs behind
            hung = time.monotonic() + 120  # only against a refresh that never comes
            while figures.get_versioned()[2] == first and time.monotonic() < hung:
                time.sleep(0.05)
        assert counting.answered > asked > 0
        assert home.answered == 0  # the portal's own cluster was never asked
    finally:
        home.shutdown()
