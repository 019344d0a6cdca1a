"""Search, keyboard, live freshness, CSV export and accessibility, in headless Chromium
(Debian's) driven by Playwright, against the real stack of tests/e2e/test_browser.py."""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from pools.inventory import inventory_sync
from tests.e2e import test_browser

# The stack (kubesim and a Prometheus scraping it) and the page of tests/e2e/test_browser.py.
stack = test_browser.stack
chromium_browser = test_browser.chromium_browser
browser_page = test_browser.browser_page
pytestmark = test_browser.pytestmark
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
PASSWORD = "walk-the-pools-1"


def log_in(page: Any, base: str, settings: Any, sim: Any, prom: Any, seconds: int = 1) -> None:
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    # Four test processes share two cores: a 30-day range query once took the page past
    # the default 2 s for all its queries, and the chart gave way to "History unavailable".
    # These tests are about what the pages draw; bench/ measures how fast.
    settings.PROMETHEUS_TIMEOUT = 30
    settings.LIVE_REFRESH_SECONDS = seconds
    inventory_sync()
    User.objects.create_superuser("ada", email="ada@example.com", password=PASSWORD)
    page.goto(f"{base}/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


@pytest.mark.django_db(transaction=True)
def test_slash_searches_from_any_page_and_live_parts_say_how_fresh(
    stack: Any, live_server: Any, settings: Any, browser_page: Any
) -> None:
    sim, prom = stack
    page = browser_page
    log_in(page, live_server.url, settings, sim, prom)
    page.goto(f"{live_server.url}/moves/")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "nav-search"
    page.keyboard.type("notebook-a100-reserve-003")
    page.keyboard.press("Enter")
    page.wait_for_url("**/search/?q=notebook-a100-reserve-003")
    pods = page.locator('[data-group="pods"]')
    assert "research/notebook-a100-reserve-003" in pods.inner_text()
    assert pods.locator("a.pool-chip").inner_text() == "mixed"

    pods.locator('a[href="/nodes/a100-reserve-003/"]').click()
    page.wait_for_url(f"{live_server.url}/nodes/a100-reserve-003/")
    age = page.locator("[data-live-age]")
    assert re.fullmatch(r"Updated \d+ s ago", age.inner_text())
    page.wait_for_selector("#node-live[data-live-updated]", timeout=10_000)
    assert age.get_attribute("data-stale") == "false"
    # The server stops answering the live part: within an interval the part says so.
    page.route("**/*partial=live*", lambda route: route.abort())
    page.wait_for_selector("[data-live-age][data-stale=true]", timeout=10_000)
    assert age.inner_text().startswith("Stale: last updated ")

    # The first Tab reaches the skip link, which takes focus past the navigation.
    page.goto(f"{live_server.url}/audit/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert page.locator(".skip-link").is_visible()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


@pytest.mark.django_db(transaction=True)
def test_csv_export_holds_what_the_filtered_table_shows(
    stack: Any, live_server: Any, settings: Any, browser_page: Any, tmp_path: Path
) -> None:
    sim, prom = stack
    page = browser_page
    log_in(page, live_server.url, settings, sim, prom, seconds=60)
    page.goto(f"{live_server.url}/pools/mixed/?ready=true")
    shown = page.locator("table.nodes tbody tr").count()
    with page.expect_download() as download:
        page.click("[data-export=nodes]")
    target = tmp_path / download.value.suggested_filename
    download.value.save_as(target)
    assert re.fullmatch(r"nodes-\d{8}-\d{6}\.csv", target.name)
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert len(rows) == shown > 0
    assert {r["pool"] for r in rows} == {"mixed"} and {r["ready"] for r in rows} == {"true"}
    assert all(r["util_percent"] != "" for r in rows)  # the DCGM figures from Prometheus


@pytest.mark.django_db(transaction=True)
def test_the_insights_charts_follow_the_window_and_their_range_tabs(
    stack: Any, live_server: Any, settings: Any, browser_page: Any
) -> None:
    sim, prom = stack
    page = browser_page
    log_in(page, live_server.url, settings, sim, prom, seconds=60)
    page.goto(f"{live_server.url}/pools/training/insights/")
    tabs = page.locator('#history nav.tabs a[aria-current="page"]')
    assert tabs.inner_text() == "30d"  # the window's range: 30 days draws 30 days
    page.click("#history nav.tabs a:text-is('1h')")
    page.wait_for_url("**/pools/training/insights/?days=30&span=1h")
    assert tabs.inner_text() == "1h"
    average = page.locator('[data-chart="average"] svg')
    assert average.get_attribute("aria-label").startswith("Average GPU utilisation, 1h: min ")
    assert page.locator('[data-chart="average"] .chart-point').count() >= 1
    # The idle whole nodes chart tops out at the pool's five nodes.
    idle = page.locator('[data-chart="idle-nodes"] svg')
    assert idle.get_attribute("aria-label").startswith("Idle whole nodes, 1h")
    assert idle.locator("text.chart-axis").all_text_contents()[:3] == ["0", "2.5", "5"]
    # Another window for the indicators is the charts' range again; a tab keeps the window.
    page.select_option("select[name=days]", "7")
    page.click("form[aria-label=Window] button")
    page.wait_for_url("**/pools/training/insights/?days=7")
    assert tabs.inner_text() == "7d"
    assert average.get_attribute("aria-label").startswith("Average GPU utilisation, 7d")
    page.click("#history nav.tabs a:text-is('30d')")
    page.wait_for_url("**/pools/training/insights/?days=7&span=30d")
    assert "Average GPU utilisation, 30d" in average.get_attribute("aria-label")
