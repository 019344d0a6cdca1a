"""The insights pages: a pool's indicators and readiness, the profiles, the advisor with its
prefilled loan request and its dismissal."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client

from pools.models import AdviceDismissal
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
