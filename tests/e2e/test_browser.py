"""A person's walk through the portal in headless Chromium (Debian's), driven by Playwright."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from pools import moves
from pools.inventory import inventory_sync
from pools.models import MoveRequest, Pool
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, RedisServer, prometheus_server
from tests.workers import celery_worker

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
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


PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 1000}


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch_chromium(playwright):  # type: ignore[no-untyped-def]
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


@pytest.fixture
def chromium_browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium_browser) -> object:  # type: ignore[no-untyped-def]
    return chromium_browser.new_page(viewport=DESKTOP)


class Watched:
    """A page whose console errors and failed requests are collected, to be asserted on."""

    def __init__(
        self, opener, *, viewport: dict[str, int] | None = None, dark: bool = False
    ) -> None:  # type: ignore[no-untyped-def]
        # A browser opens a page with its own viewport and theme (and cookies); a context
        # (viewport None) one that shares the context's settings and session.
        scheme = "dark" if dark else "light"
        self.page = (
            opener.new_page(viewport=viewport, color_scheme=scheme)
            if viewport
            else (opener.new_page())
        )
        self.problems: list[str] = []
        # Statuses of 400 or more a page is expected to answer (a 403 for a role that may
        # not open it), by URL: those are the page's answer, not a failure.
        self.expected: dict[str, int] = {}
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        self.page.on("requestfailed", self._failed)
        self.page.on("response", self._response)

    def expect_status(self, url: str, status: int) -> None:
        if status >= 400:
            self.expected[url] = status

    def _response(self, response) -> None:  # type: ignore[no-untyped-def]
        if response.status >= 400 and self.expected.get(response.url) != response.status:
            self.problems.append(f"{response.status}: {response.url}")

    def _console(self, message) -> None:  # type: ignore[no-untyped-def]
        if message.type != "error":
            return
        # Chromium logs every answer of 400 or more to the console, the expected ones too.
        url = message.location.get("url", "")
        status = self.expected.get(url)
        if status and f"status of {status}" in message.text:
            return
        self.problems.append(f"console: {message.text}")

    def _failed(self, request) -> None:  # type: ignore[no-untyped-def]
        # A live part's fetch cut short by leaving the page is not a failure of the page,
        # nor is the icon's, which the browser fetches on its own.
        aborted = request.failure == "net::ERR_ABORTED"
        if aborted and ("partial=live" in request.url or "favicon" in request.url):
            return
        self.problems.append(f"failed: {request.url} ({request.failure})")

    def log_in(self, base: str, username: str, password: str) -> None:
        self.page.goto(f"{base}/login/")
        self.page.fill("#id_username", username)
        self.page.fill("#id_password", password)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(f"{base}/")

    def too_wide(self) -> list[str]:
        """The outermost elements that reach past the right edge (what makes it scroll)."""
        return list(
            self.page.evaluate(
                """() => { const w = document.documentElement.clientWidth; const out = [];
                for (const e of document.querySelectorAll('body *')) {
                  if (e.getBoundingClientRect().right > w + 1 &&
                      !(e.parentElement && e.parentElement.getBoundingClientRect().right > w + 1)
                      && !e.closest('.table-scroll, .snippet')) {
                    out.push(e.tagName + '.' + e.className + ' ' + e.textContent.slice(0, 40));
                  }
                } return out; }"""
            )
        )

    def no_sideways_scroll(self) -> bool:
        return bool(
            self.page.evaluate(
                "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
            )
        )


def charted(page, points: str) -> None:  # type: ignore[no-untyped-def]
    """For the docs, a chart with a few points: the stack's Prometheus has scraped for only
    a minute or so, a point every 15 s at the 1 h range (reloaded until then, at most 90 s)."""
    if os.environ.get("SAVE_SCREENSHOTS") != "1":
        return
    for _ in range(45):
        if page.locator(points).count() >= 4:
            return
        page.wait_for_timeout(2000)
        page.reload()


def shoot(page, name: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Screenshots go to the test's folder; `make screenshots` keeps them in docs/."""
    target = SCREENSHOTS if os.environ.get("SAVE_SCREENSHOTS") == "1" else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"{name}.png"), full_page=True)
    assert (target / f"{name}.png").stat().st_size > 10_000


@pytest.mark.django_db(transaction=True)
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


# The newest pages, shot in both themes for docs/screenshots/ (tests/e2e/test_browser_roles.py
# walks every page in every role).
SHOTS = {
    "node": "/nodes/a100-train-drift-000/",
    "pending": "/pending/",
    "fit": "/fit/?pod=ml-training/big-train",
    "insights": "/pools/training/insights/?days=7&span=1h",
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_theme_follows_the_system_from_phone_to_desktop(
    stack,
    live_server,
    settings,
    chromium_browser,  # type: ignore[no-untyped-def]
    viewport: dict[str, int],
    tmp_path: Path,
) -> None:
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    inventory_sync()
    User.objects.create_superuser("ada", password="walk-the-pools-1")
    phone = viewport is PHONE
    for dark in (False, True):
        watched = Watched(chromium_browser, viewport=viewport, dark=dark)
        watched.log_in(live_server.url, "ada", "walk-the-pools-1")
        page = watched.page
        suffix = ("-phone" if phone else "") + ("-dark" if dark else "")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (background == "rgb(15, 19, 26)") == dark  # the theme follows the system
        chip = page.locator('[data-pool="training"] a.pool-chip')
        # The pool's own colour (#d9822b), a quarter darker under the chip's white text.
        colour = "e => getComputedStyle(e).getPropertyValue('--pool-colour').trim()"
        assert chip.evaluate(colour) == "#d9822b"
        background = chip.evaluate("e => getComputedStyle(e).backgroundColor")
        assert background == "color(srgb 0.638235 0.382353 0.126471)"  # 0.75 of 217, 130, 43
        assert watched.no_sideways_scroll(), watched.too_wide()
        if not phone or not dark:
            shoot(page, f"overview{suffix}", tmp_path)
        for name, path in SHOTS.items() if not phone else ():
            page.goto(f"{live_server.url}{path}")
            if name == "insights":
                charted(page, '[data-chart="average"] .chart-point')
            assert watched.no_sideways_scroll(), (path, watched.too_wide())
            shoot(page, f"{name}{suffix}", tmp_path)
        assert watched.problems == [], watched.problems
        watched.page.close()


def pending_move_and_its_approver(browser, base: str) -> tuple[MoveRequest, Watched]:  # type: ignore[no-untyped-def]
    """Rita's request to move the two new nodes to `mixed`, and Arno (an approver) signed in
    on its page."""
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["gpu-new-000", "gpu-new-001"],
        destination=Pool.objects.get(name="mixed"),
        reason="assign the new nodes",
        now=timezone.now(),
    )
    arno = user_in("approvers", "arno")
    arno.set_password("approve-the-move-1")
    arno.save()
    watched = Watched(browser, viewport=DESKTOP)
    watched.log_in(base, "arno", "approve-the-move-1")
    watched.page.goto(f"{base}/moves/{move.pk}/")
    return move, watched


def approve_on_its_page(watched: Watched, base: str, move: MoveRequest) -> None:
    watched.page.fill("#id_reason", "fine")
    watched.page.click("button:text('Approve')")
    watched.page.wait_for_url(f"{base}/moves/{move.pk}/")


@pytest.mark.django_db(transaction=True)
def test_the_move_page_follows_a_move_until_it_ends(
    stack,
    live_server,
    settings,
    chromium_browser,  # type: ignore[no-untyped-def]
    redis: RedisServer,
    tmp_path: Path,
) -> None:
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.PROMETHEUS_URL = prom.url
    settings.LIVE_REFRESH_SECONDS = 1
    inventory_sync()
    move, watched = pending_move_and_its_approver(chromium_browser, live_server.url)
    page = watched.page
    assert page.locator("[data-move-state]").get_attribute("data-move-state") == "pending"
    # Approved before any worker runs: the execution waits in the broker, the page says so.
    approve_on_its_page(watched, live_server.url, move)
    assert page.locator("[data-move-state]").get_attribute("data-move-state") == "approved"
    loaded_at = page.evaluate("performance.timeOrigin")
    with celery_worker(tmp_path):
        # The page follows the move in place: per node state and attempts, then the end.
        page.wait_for_selector('[data-move-state="succeeded"]', timeout=60_000)
        page.wait_for_selector("#move-live[data-live-stopped]", timeout=10_000)
    assert page.evaluate("performance.timeOrigin") == loaded_at  # no reload
    # It says it is final, not how long ago it refreshed (static/portal/live_age.js).
    assert page.locator("[data-live-age]").inner_text().startswith("Final: updated at ")
    move.refresh_from_db()
    assert move.state == MoveRequest.State.SUCCEEDED
    for name in ("gpu-new-000", "gpu-new-001"):
        row = page.locator(f'#move-live tr[data-node="{name}"]')
        assert row.locator('[data-col="result"] .state').inner_text() == "Done"
        assert row.locator('[data-col="attempts"]').inner_text() == "1"
    assert "2 of 2 nodes finished" in page.inner_text("#move-live")
    stopped = page.locator("#move-live").get_attribute("data-live-updated")
    page.wait_for_timeout(2500)  # two refresh periods: nothing is fetched any more
    assert page.locator("#move-live").get_attribute("data-live-updated") == stopped
    shoot(page, "move", tmp_path)
    assert watched.problems == [], watched.problems


@pytest.mark.django_db(transaction=True)
def test_retire_asks_first_and_a_retired_pool_can_be_restored(
    live_server,
    chromium_browser,  # type: ignore[no-untyped-def]
) -> None:
    User.objects.create_superuser("ada", password="walk-the-pools-1")
    watched = Watched(chromium_browser, viewport=PHONE)
    watched.log_in(live_server.url, "ada", "walk-the-pools-1")
    page = watched.page
    page.goto(f"{live_server.url}/pools/shared/")
    page.click("text=Retire pool…")
    page.wait_for_url(f"{live_server.url}/pools/shared/retire/")
    assert Pool.objects.get(name="shared").retired_at is None  # asked, not done
    page.click("button:text('Retire shared')")
    page.wait_for_url("**/pools/?retired=1")
    assert page.locator('[data-pool-row="shared"]').count() == 1
    page.click('[data-pool-row="shared"] button:text("Restore")')
    page.wait_for_url(f"{live_server.url}/pools/shared/")
    assert "Pool shared restored." in page.inner_text(".messages")
    assert Pool.objects.get(name="shared").retired_at is None
    assert watched.no_sideways_scroll()
    assert watched.problems == [], watched.problems


@pytest.mark.django_db(transaction=True)
def test_from_a_pending_pod_to_its_fit_check(
    stack,
    live_server,
    settings,
    browser_page,  # type: ignore[no-untyped-def]
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
    # The pod is listed under its group: the pool it asks for and its reason, said once.
    pod = page.locator('[data-pod="ml-training/big-train"]')
    group = page.locator("tr[data-pending-group]", has=pod)
    assert group.get_attribute("data-pending-group") == "training"
    assert "Insufficient nvidia.com/gpu" in group.inner_text()

    pod.locator("text=Fit check").click()
    page.wait_for_url("**/fit/?pod=ml-training/big-train")
    training = page.locator('#fit-result tr[data-pool="training"]')
    assert "0/5 nodes are available: 5 Insufficient nvidia.com/gpu." in training.inner_text()
    with page.expect_download() as download:
        training.locator("button", has_text="Download").click()
    assert download.value.suggested_filename == "big-train-training.yaml"

    page.goto(f"{live_server.url}/pools/training/")
    assert page.locator("#pool-intruders tr[data-intruder]").count() == 3
