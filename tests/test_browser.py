"""A person's walk through the portal in headless Chromium (Debian's), driven by Playwright."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from pools.inventory import inventory_sync
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, prometheus_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (make test installs it with apt when run as root)",
    ),
]
# Django's ORM refuses to run inside Playwright's event loop thread without this.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    with (
        kubesim_server(tmp_path_factory.mktemp("kubesim")) as sim,
        prometheus_server(
            tmp_path_factory.mktemp("prom"),
            scrape_targets=[sim.metrics_url.removeprefix("http://")],
        ) as prom,
    ):
        yield sim, prom


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield page
        browser.close()


def shoot(page, name: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Screenshots go to the test's folder; `make screenshots` keeps them in docs/."""
    target = SCREENSHOTS if os.environ.get("SAVE_SCREENSHOTS") == "1" else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"{name}.png"), full_page=True)
    assert (target / f"{name}.png").stat().st_size > 10_000


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_log_in_and_walk_overview_pool_node(
    stack,
    live_server,
    settings,
    browser_page,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.METRICS_CACHE_SECONDS = 0
    settings.LIVE_REFRESH_SECONDS = 1
    inventory_sync()
    User.objects.create_superuser("ada", password="walk-the-pools-1")
    page = browser_page

    page.goto(f"{live_server.url}/pools/training/")
    assert "/login/" in page.url  # login first, then back where we were going
    page.fill("#id_username", "ada")
    page.fill("#id_password", "walk-the-pools-1")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/pools/training/")

    page.goto(f"{live_server.url}/")
    assert page.locator("article.card").count() == 5
    assert page.locator('[data-pool="training"] [data-figure="gpus"]').inner_text() == "40"
    # The live part is fetched again and replaced in place, without a page load.
    page.wait_for_selector("#overview-live[data-live-updated]", timeout=10_000)
    assert page.locator('[data-pool="training"] [data-figure="gpus"]').inner_text() == "40"
    shoot(page, "overview", tmp_path)

    page.click('[data-pool="training"] a.pool-chip')
    page.wait_for_url(f"{live_server.url}/pools/training/")
    assert page.locator("table.nodes tbody tr").count() == 5
    page.select_option("select[name=drifted]", "true")
    page.click("form.filters button")
    page.wait_for_url("**drifted=true**")
    assert page.locator("table.nodes tbody tr").count() == 1
    shoot(page, "pool", tmp_path)

    page.click("text=a100-train-drift-000")
    page.wait_for_url(f"{live_server.url}/nodes/a100-train-drift-000/")
    assert "Drifted:" in page.inner_text("main")
    page.wait_for_selector("#node-live[data-live-updated]", timeout=10_000)
    shoot(page, "node", tmp_path)


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_from_a_pending_pod_to_its_fit_check(
    stack,
    live_server,
    settings,
    browser_page,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    sim, _ = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    inventory_sync()
    User.objects.create_superuser("ada", password="walk-the-pools-1")
    page = browser_page
    page.goto(f"{live_server.url}/pending/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "walk-the-pools-1")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/pending/")
    row = page.locator('[data-pod="ml-training/big-train"]')
    assert "Insufficient nvidia.com/gpu" in row.inner_text()
    shoot(page, "pending", tmp_path)

    row.locator("text=Fit check").click()
    page.wait_for_url("**/fit/?pod=ml-training/big-train")
    training = page.locator('#fit-result tr[data-pool="training"]')
    assert "0/5 nodes are available: 5 Insufficient nvidia.com/gpu." in training.inner_text()
    shoot(page, "fit", tmp_path)
    with page.expect_download() as download:
        training.locator("button", has_text="Download").click()
    assert download.value.suggested_filename == "big-train-training.yaml"

    page.goto(f"{live_server.url}/pools/training/")
    assert page.locator("#pool-intruders tr[data-intruder]").count() == 3
