"""The insights pages wait for a hung Prometheus at most one PROMETHEUS_TIMEOUT in total,
as every other page does: after the first query that waited its time, none more is sent
(the hung server counts what it was sent) and the page says why."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from pools.metrics.dcgm import metric_labels
from pools.metrics.queries import node_figure_queries
from tests.insights import scenarios
from tests.moves_helpers import user_in
from tests.servers import hung_server

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(settings) -> Client:  # type: ignore[no-untyped-def]
    settings.PROMETHEUS_TIMEOUT = 1.0
    cache.clear()
    client = Client()
    client.force_login(user_in("viewers", "hung-viewer"))
    return client


def node_figures() -> int:
    return len(node_figure_queries(metric_labels(), hot_celsius=85, idle_window="1h"))


@pytest.mark.parametrize("path", ["/pools/oom/insights/?days=30", "/advice/?days=30"])
def test_an_insights_page_waits_for_a_hung_prometheus_once(
    viewer: Client,
    settings,  # type: ignore[no-untyped-def]
    path: str,
) -> None:
    scenarios.oom()
    with hung_server() as hung:
        settings.PROMETHEUS_URL = hung.url
        page = viewer.get(path)
        # The node figures, asked at once, waited one second together; the DCGM history
        # (XID errors, utilisation) was not asked after them.
        assert hung.accepted == node_figures()
    assert page.status_code == 200


def test_the_pool_insights_page_says_why_its_history_is_missing(
    viewer: Client,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    scenarios.oom()
    with hung_server() as hung:
        settings.PROMETHEUS_URL = hung.url
        html = viewer.get("/pools/oom/insights/?days=30").content.decode()
    assert "not asked: Prometheus did not answer within 1s earlier on this page" in html


def test_the_profiles_page_waits_for_a_hung_prometheus_once(
    viewer: Client,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    scenarios.oom()
    with hung_server() as hung:
        settings.PROMETHEUS_URL = hung.url
        page = viewer.get("/insights/profiles/?days=7")
        assert hung.accepted == 1
    assert page.status_code == 200
    assert "Prometheus did not answer within 1s" in page.content.decode()
