"""The insights pages: a pool's indicators and readiness, the profiles, the advisor with its
prefilled loan request and its dismissal."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client

from pools.metrics import insights as metrics
from pools.metrics.insights import PoolSeries
from pools.models import AdviceDismissal, GpuPod
from tests.insights import scenarios
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db


def session(role: str) -> Client:
    client = Client()
    client.force_login(user_in(role, f"page-{role}"))
    return client


def test_pool_insights_page_shows_the_four_indicators_and_readiness() -> None:
    scenarios.oom()
    page = session("viewers").get("/pools/oom/insights/?days=30")
    assert page.status_code == 200
    html = page.content.decode()
    for section in ('id="utilisation"', 'id="queue"', 'id="failures"', 'id="replacement"'):
        assert section in html
    assert "<th>out of memory</th><td>9</td>" in html
    assert "<th>image problem</th><td>1</td>" in html
    assert 'data-check="metrics"' in html and 'data-check="loans"' in html
    assert session("viewers").get("/pools/oom/insights/?days=8").status_code == 404
    assert 'href="/pools/oom/insights/"' in session("viewers").get("/pools/oom/").content.decode()


def test_profiles_page_lists_each_class() -> None:
    scenarios.idle()
    html = session("viewers").get("/insights/profiles/?days=7&by=team").content.decode()
    assert "<td>ml</td><td>training</td><td>42</td>" in html  # 6 nodes a day, 7 days


def test_the_advisor_prefills_a_loan_that_still_needs_an_approval() -> None:
    scenarios.queue()
    requester = session("requesters")
    html = requester.get("/advice/").content.decode()
    assert 'data-advice="lend:idle+queue"' in html
    link = html.split('<a class="btn" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    query = parse_qs(urlparse(link).query)
    assert query["nodes"] == ["idle-000"] and query["destination"] == ["queue"]
    assert query["loan_days"] == ["7"]
    form = requester.get(link).content.decode()
    assert "Advisor: loan for 7 days of 1 idle node from idle" in form
    assert 'name="loan_until" value="' in form
    # A viewer sees the suggestion, not the buttons.
    assert "Ask for this loan" not in session("viewers").get("/advice/").content.decode()


def test_dismissing_on_the_page_needs_a_reason_and_hides_the_suggestion() -> None:
    scenarios.queue()
    requester = session("requesters")
    requester.post("/advice/dismiss/", {"key": "lend:idle+queue", "reason": "", "days": "30"})
    assert not AdviceDismissal.objects.exists()
    response = requester.post(
        "/advice/dismiss/", {"key": "lend:idle+queue", "reason": "rebuilding", "days": "30"}
    )
    assert response.status_code == 302
    assert AdviceDismissal.objects.get().reason == "rebuilding"
    assert 'data-advice="lend:idle+queue"' not in requester.get("/advice/").content.decode()
    forbidden = session("viewers").post("/advice/dismiss/", {"key": "x", "reason": "y"})
    assert forbidden.status_code == 403


@pytest.mark.parametrize("days", [7, 30, 90])
def test_the_window_chosen_is_the_charts_range(days: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Choosing 30 days draws 30 days, not the charts' default 24 h, however short the
    history Prometheus holds; a range asked for on the tabs still wins."""
    scenarios.idle()
    end = time.time()
    day = [(end - 86_400 + h * 3600, 3.0) for h in range(25)]
    monkeypatch.setattr(
        metrics, "pool_series", lambda pools, **_: PoolSeries({"idle": day}, {"idle": day}, None)
    )
    viewer = session("viewers")
    html = viewer.get(f"/pools/idle/insights/?days={days}").content.decode()
    assert f"Average GPU utilisation, {days}d" in html
    assert f"Idle whole nodes, {days}d" in html
    assert f'aria-current="page">{days}d</a>' in html
    assert 'name="span"' not in html  # the window's form does not hold the old range
    start = datetime.fromtimestamp(end - days * 86_400, UTC).strftime("%d %b")
    assert f'class="chart-axis">{start} ' in html  # the axis starts at the window's start
    tab = viewer.get(f"/pools/idle/insights/?days={days}&span=6h").content.decode()
    assert "Average GPU utilisation, 6h" in tab


def test_profiles_show_cores_and_binary_units_and_a_dash_for_nothing_requested() -> None:
    scenarios.idle()
    GpuPod.objects.filter(pk=GpuPod.objects.order_by("pk")[0].pk).update(
        namespace="tiny", cpu_milli=0, memory_bytes=0
    )
    html = session("viewers").get("/insights/profiles/?days=30&by=namespace").content.decode()
    assert "<td>8 cores</td><td>64.0 GiB</td>" in html  # the pods ask for 8,000 m and 64 GiB
    assert "<td>—</td><td>—</td>" in html  # the one that asked for nothing
    assert " m</td>" not in html and " GB</td>" not in html and "bytes</td>" not in html
