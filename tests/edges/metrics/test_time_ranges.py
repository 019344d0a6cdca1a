"""Chart time ranges: 1 h to 30 d, a constant number of points, the same PromQL per page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client

from pools.core import charts
from pools.metrics import queries
from tests.factories import demo_inventory
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer


@pytest.mark.parametrize(
    ("name", "span", "step"),
    [
        ("1h", timedelta(hours=1), timedelta(seconds=15)),
        ("6h", timedelta(hours=6), timedelta(seconds=90)),
        ("24h", timedelta(hours=24), timedelta(minutes=6)),
        ("7d", timedelta(days=7), timedelta(minutes=42)),
        ("30d", timedelta(days=30), timedelta(hours=3)),
    ],
)
def test_each_range_has_the_step_that_draws_a_constant_number_of_points(
    name: str, span: timedelta, step: timedelta
) -> None:
    assert charts.time_range(name) == (span, step)
    assert span / step == charts.CHART_POINTS


def test_the_step_never_goes_below_a_scrape_interval() -> None:
    assert charts.chart_step(timedelta(minutes=10)) == charts.MIN_STEP


@pytest.mark.parametrize("name", ["2h", "", "24H", "1d"])
def test_an_unknown_range_is_refused(name: str) -> None:
    with pytest.raises(charts.UnknownRange, match="one of 1h, 6h, 24h, 7d, 30d"):
        charts.time_range(name)


@pytest.fixture
def viewer(db) -> Client:  # type: ignore[no-untyped-def]
    demo_inventory()
    client = Client()
    client.force_login(user_in("viewers", "vic"))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["/pools/training/", "/nodes/a100-train-000/"])
def test_a_bad_range_is_a_400(viewer: Client, page: str) -> None:
    response = viewer.get(f"{page}?span=2h")
    assert response.status_code == 400
    assert "Unknown time range &#x27;2h&#x27;: one of 1h, 6h, 24h, 7d, 30d." in (
        response.content.decode()
    )


@pytest.mark.django_db
def test_the_pages_offer_every_range(viewer: Client) -> None:
    for page in ("/pools/training/?span=30d", "/nodes/a100-train-000/?span=1h"):
        html = viewer.get(page).content.decode()
        for name in charts.TIME_RANGES:
            link = re.search(rf'<a href="\?span={name}"\s*(aria-current="page")?>{name}</a>', html)
            assert link is not None, name
            assert bool(link.group(1)) == page.endswith(f"={name}")


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["/pools/training/", "/nodes/a100-train-000/"])
def test_the_range_does_not_change_how_many_queries_a_page_sends(
    viewer: Client,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
    page: str,
) -> None:
    settings.PROMETHEUS_URL = prometheus.url
    settings.METRICS_CACHE_SECONDS = 0  # every page asks again: the count is the page's
    counts = {}
    for name in charts.TIME_RANGES:
        cache.clear()
        before = prometheus.query_count()
        assert viewer.get(f"{page}?span={name}").status_code == 200
        counts[name] = prometheus.queries_since(before)
    print(f"PromQL queries of {page} per range: {counts}")
    assert len(set(counts.values())) == 1 and counts["1h"] > 0, counts


INSIGHTS = "/pools/training/insights/"


@pytest.mark.django_db
def test_the_insights_page_refuses_a_bad_range_and_offers_every_range(
    viewer: Client,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_URL = prometheus.url
    response = viewer.get(f"{INSIGHTS}?days=7&span=2h")
    assert response.status_code == 400
    assert "Unknown time range &#x27;2h&#x27;: one of 1h, 6h, 24h, 7d, 30d, 90d." in (
        response.content.decode()
    )
    html = viewer.get(f"{INSIGHTS}?days=7&span=6h").content.decode()
    for name in charts.WINDOW_RANGES:
        # Each tab keeps the indicators' window; a window chosen is the range again.
        link = re.search(
            rf'<a href="\?days=7&amp;span={name}"\s*(aria-current="page")?>{name}</a>', html
        )
        assert link is not None, name
        assert bool(link.group(1)) == (name == "6h")
    assert 'name="span"' not in html
    assert "Average GPU utilisation, 6h" in html and "Idle whole nodes, 6h" in html


@pytest.mark.django_db
def test_the_insights_charts_draw_a_constant_number_of_points_with_constant_queries(
    viewer: Client,
    prometheus: PrometheusServer,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.PROMETHEUS_URL = prometheus.url
    settings.METRICS_CACHE_SECONDS = 0
    counts, points = {}, {}
    for name in charts.TIME_RANGES:
        cache.clear()
        before, ranges_before = prometheus.query_count(), len(prometheus.ranges_sent())
        # A 90-day window: the indicators' range queries span no chart range.
        assert viewer.get(f"{INSIGHTS}?days=90&span={name}").status_code == 200
        counts[name] = prometheus.queries_since(before)
        span = charts.time_range(name)[0].total_seconds()
        # The charts' queries: the pool's figures (tagged with it) over the chart's range.
        points[name] = [
            round((end - start) / step) + 1
            for query, start, end, step in prometheus.ranges_sent()[ranges_before:]
            if queries.POOL_TAG in query and round(end - start) == span
        ]
    print(f"PromQL queries of {INSIGHTS} per range: {counts}; chart points: {points}")
    assert len(set(counts.values())) == 1 and counts["1h"] > 0, counts
    # Every chart query draws the same number of points (both ends count), whatever the range.
    assert {n for found in points.values() for n in found} == {charts.CHART_POINTS + 1}, points
    assert len({len(found) for found in points.values()}) == 1 and points["1h"], points
