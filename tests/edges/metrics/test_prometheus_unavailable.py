"""Prometheus stopped or hung: answers that need metrics say so instead of looking empty, and
a page waits for Prometheus at most one PROMETHEUS_TIMEOUT in total (a hung server counts
the queries it was sent: after the first wait, none more)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client

from pools.metrics.dcgm import metric_labels
from pools.metrics.queries import node_figure_queries
from pools.tokens import token_create
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, free_port, hung_server, prometheus_server

NODE = "a100-infer-000"
HEALTH = ("xid", "hot", "no-metrics", "idle-held", "healthy")


@pytest.fixture
def viewer_token(db) -> Client:  # type: ignore[no-untyped-def]
    demo_inventory()
    cache.clear()
    return api(token_create(user=user_in("viewers", "vera"), name="script")[1])


@pytest.fixture
def viewer_session(db) -> Client:  # type: ignore[no-untyped-def]
    session = Client()
    session.force_login(user_in("viewers", "vic"))
    return session


def test_health_filters_answer_503_when_prometheus_is_stopped(
    viewer_token: Client,
    settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    with prometheus_server(tmp_path) as stopped:
        settings.PROMETHEUS_URL = stopped.url
    for health in HEALTH:
        cache.clear()
        response = viewer_token.get(f"/api/v1/nodes/?health={health}")
        assert response.status_code == 503, (health, response.content)
        error = response.json()["error"]
        assert error["code"] == "metrics_unavailable"
        assert f"Prometheus unreachable at {stopped.url}" in error["message"]


def test_list_and_detail_say_whether_metrics_were_available(
    viewer_token: Client,
    settings,  # type: ignore[no-untyped-def]
    prometheus: PrometheusServer,
) -> None:
    settings.PROMETHEUS_URL = prometheus.url
    cache.clear()
    before = datetime.now(UTC)
    body = viewer_token.get("/api/v1/nodes/").json()
    assert (body["metrics_available"], body["metrics_error"]) == (True, None)
    # When the figures were asked: this request's (none were kept), not a made-up time.
    as_of = datetime.fromisoformat(body["metrics_as_of"])
    assert before - timedelta(seconds=1) <= as_of <= datetime.now(UTC)
    detail = viewer_token.get(f"/api/v1/nodes/{NODE}/").json()
    assert (detail["metrics_available"], detail["metrics_error"]) == (True, None)
    # The same with nothing listening: the nodes are there, their metrics unknown.
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    cache.clear()
    body = viewer_token.get("/api/v1/nodes/").json()
    assert body["metrics_available"] is False
    assert "Prometheus unreachable" in body["metrics_error"]
    assert body["metrics_as_of"] is None
    assert len(body["results"]) > 0
    detail = viewer_token.get(f"/api/v1/nodes/{NODE}/").json()
    assert detail["metrics_available"] is False
    assert "Prometheus unreachable" in detail["metrics_error"]


def test_the_pool_page_says_its_health_filter_needs_metrics(
    viewer_token: Client,
    viewer_session: Client,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    page = viewer_session.get("/pools/training/?health=xid").content.decode()
    assert "This filter needs the DCGM metrics, which are unavailable" in page
    assert 'data-node="' not in page  # no rows guessed


def panel_errors(page: str) -> list[str]:
    return re.findall(r'class="banner-inline banner-bad"[^>]*>([^<]*)<', page)


def test_the_node_page_waits_for_a_hung_prometheus_once(
    viewer_token: Client,
    viewer_session: Client,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_TIMEOUT = 1.0
    with hung_server() as hung:
        settings.PROMETHEUS_URL = hung.url
        page = viewer_session.get(f"/nodes/{NODE}/").content.decode()
        # The GPU query waited its second; the two 24 h charts were not asked.
        assert hung.accepted == 1
    errors = panel_errors(page)
    assert "GPU figures unavailable: Prometheus did not answer within 1s." in errors
    assert (
        "History unavailable: not asked: Prometheus did not answer within 1s earlier on "
        "this page." in errors
    )


def test_the_pool_page_waits_for_a_hung_prometheus_once(
    viewer_token: Client,
    viewer_session: Client,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_TIMEOUT = 1.0
    batch = node_figure_queries(metric_labels(), hot_celsius=85, idle_window="1h")
    with hung_server() as hung:
        settings.PROMETHEUS_URL = hung.url
        page = viewer_session.get("/pools/training/").content.decode()
        # The node figures, asked at once, waited one second together; the history was not
        # asked after them.
        assert hung.accepted == len(batch)
    assert "Prometheus did not answer within 1s" in page
    assert (
        "History unavailable: not asked: Prometheus did not answer within 1s earlier on "
        "this page." in panel_errors(page)
    )


def test_the_api_node_detail_waits_for_a_hung_prometheus_once(
    viewer_token: Client,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_TIMEOUT = 1.0
    with hung_server() as hung:
        settings.PROMETHEUS_URL = hung.url
        detail = viewer_token.get(f"/api/v1/nodes/{NODE}/").json()
        assert hung.accepted == 1
    assert detail["metrics_available"] is False
    assert detail["metrics_error"] == "Prometheus did not answer within 1s"
