"""Content-Security-Policy on every response, no violation on the pages a person uses, and
no caching of the page that shows a new token's secret."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.inventory import inventory_sync
from pools.models import Pool
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, prometheus_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
POLICY = "default-src 'self'"
# Django's ORM refuses to run inside Playwright's event loop thread without this.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def policy_of(response) -> str:  # type: ignore[no-untyped-def]
    return response.headers.get("Content-Security-Policy", "")


@pytest.mark.django_db
def test_every_kind_of_response_carries_the_policy(client: Client) -> None:
    anonymous = {
        "/login/": 200,
        "/healthz": 200,
        "/": 302,  # to the login
        "/api/v1/pools/": 401,
        "/static/portal/portal.css": 200,
        "/no/such/page/": 404,
    }
    for path, status in anonymous.items():
        response = client.get(path)
        assert response.status_code == status, path
        assert POLICY in policy_of(response), path
    client.force_login(user_in("viewers"))
    for path in ("/", "/api/v1/summary/", "/no/such/page/"):
        response = client.get(path)
        assert POLICY in policy_of(response), path
    policy = policy_of(client.get("/"))
    assert "'unsafe-inline'" not in policy and "frame-ancestors 'none'" in policy


@pytest.mark.django_db
def test_the_page_with_a_new_token_secret_is_never_stored(client: Client) -> None:
    client.force_login(user_in("viewers"))
    response = client.post("/tokens/", {"name": "ci pipeline"})
    assert response.status_code == 302  # then the page that shows the secret, once
    shown = client.get("/tokens/")
    assert b"ci pipeline" in shown.content and b'id="token-secret"' in shown.content
    assert "no-store" in shown.headers["Cache-Control"]
    assert "no-store" in client.get("/tokens/").headers["Cache-Control"]


# --- in a real browser: the pages ask for nothing the policy refuses ---


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
def chromium() -> Iterator[object]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (make test installs it with apt when run as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"],
        )
        yield browser
        browser.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_csp_violation_on_the_main_pages(stack, live_server, settings, chromium) -> None:  # type: ignore[no-untyped-def]
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    settings.LIVE_REFRESH_SECONDS = 1
    inventory_sync()
    User.objects.create_superuser("ada", password="walk-the-pools-1")
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["gpu-new-000"],
        destination=Pool.objects.get(name="mixed"),
        reason="csp walk",
        now=timezone.now(),
    )
    page = chromium.new_page()
    console: list[str] = []
    page.on(
        "console",
        lambda message: console.append(f"{message.type}: {page.url}: {message.text}"),
    )
    page.on("pageerror", lambda error: console.append(f"pageerror: {page.url}: {error}"))

    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "walk-the-pools-1")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    for path in (
        "/",
        "/pools/training/",
        "/nodes/a100-train-drift-000/",
        "/moves/",
        "/moves/new/?nodes=gpu-new-001&destination=mixed",
        f"/moves/{move.pk}/",
        "/loans/",
        "/audit/",
        "/tokens/",
        "/pools/training/edit/",
        "/pools/",
        "/pools/?retired=1",
        "/pools/shared/retire/",
        "/api/docs/",
    ):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
    # A live part refreshes in place (its script and its fetch both allowed).
    page.goto(f"{live_server.url}/")
    page.wait_for_selector("#overview-live[data-live-updated]", timeout=10_000)
    violations = [line for line in console if "Content Security Policy" in line]
    assert violations == [], "\n".join(violations)
    assert [line for line in console if line.startswith("pageerror")] == []  # scripts ran
