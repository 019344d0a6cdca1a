"""Every page in every role, in headless Chromium (Debian's) driven by Playwright: at 1400 px
and 390 px wide, no sideways page scroll, no console error, no failed request. A page the
role may not open answers the site's 403 page with the reason (the role it needs), and
that 403 is the only status of 400 or more the walk accepts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from pools import bookings, moves
from pools.common.roles import Capability, Role, refusal_reason
from pools.inventory import inventory_sync
from pools.maintenance import waves
from pools.models import Maintenance, MaintenanceNode, Pool, Reclaim
from tests.e2e import test_browser
from tests.e2e.test_browser import DESKTOP, PHONE, Watched
from tests.factories import reclaim_row
from tests.moves_helpers import user_in

stack = test_browser.stack
pytestmark = test_browser.pytestmark
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
PASSWORD = "walk-every-page-1"

MOVE_FORM = "/moves/new/?node=gpu-new-000"
BOOKING_FORM = "/bookings/new/?pool=mixed"
POOL_FORMS = {
    "/pools/new/",
    "/pools/training/edit/",
    "/pools/shared/retire/",
    "/pools/training/maintenance/new/",
}

# Every page a person opens, with the capability it needs ({move}: a pending loan request).
PAGES: tuple[tuple[str, Capability], ...] = (
    ("/", Capability.VIEW),
    ("/pools/", Capability.VIEW),
    ("/pools/?retired=1", Capability.VIEW),
    ("/fleet/", Capability.VIEW),
    ("/pools/training/", Capability.VIEW),
    ("/pools/unassigned/", Capability.VIEW),
    ("/pools/training/insights/", Capability.VIEW),
    ("/pools/training/drills/", Capability.VIEW),
    ("/maintenance/", Capability.VIEW),
    ("/bookings/", Capability.VIEW),
    ("/pools/mixed/reclaim/", Capability.VIEW),
    ("/insights/idle/", Capability.VIEW),
    ("/bookings/{booking}/", Capability.VIEW),
    ("/pools/mixed/calendar/", Capability.VIEW),
    ("/pools/mixed/calendar/?view=month", Capability.VIEW),
    ("/maintenance/{maintenance}/", Capability.VIEW),
    ("/reclaims/{reclaim}/", Capability.VIEW),
    ("/nodes/a100-train-drift-000/", Capability.VIEW),
    ("/moves/", Capability.VIEW),  # the pending approvals (the approvers' bulk selection)
    ("/moves/?state=all", Capability.VIEW),
    ("/moves/{move}/", Capability.VIEW),
    ("/loans/", Capability.VIEW),
    ("/audit/", Capability.VIEW),
    ("/fit/", Capability.VIEW),
    ("/fit/?pod=ml-training/big-train", Capability.VIEW),
    ("/pending/", Capability.VIEW),
    ("/insights/profiles/", Capability.VIEW),
    ("/advice/", Capability.VIEW),
    ("/search/?q=a100-train", Capability.VIEW),
    ("/search/?q=%23{move}", Capability.VIEW),
    ("/tokens/", Capability.VIEW),
    ("/api/docs/", Capability.VIEW),
    (MOVE_FORM, Capability.REQUEST_MOVE),
    (BOOKING_FORM, Capability.REQUEST_MOVE),
    ("/pools/new/", Capability.EDIT_POOLS),
    ("/pools/training/edit/", Capability.EDIT_POOLS),
    ("/pools/shared/retire/", Capability.EDIT_POOLS),
    ("/pools/training/maintenance/new/", Capability.EDIT_POOLS),
)
# What each role may not open: a 403 page.
REFUSED: dict[Role, set[str]] = {
    Role.VIEWER: {MOVE_FORM, BOOKING_FORM, *POOL_FORMS},
    Role.REQUESTER: POOL_FORMS,
    Role.APPROVER: {MOVE_FORM, BOOKING_FORM, *POOL_FORMS},
    Role.POOL_ADMIN: set(),
}
# (role, dark theme). A pool admin opens every page, walked in the dark theme; the light theme
# is seen on every page the three other roles open. A superuser holds exactly a pool admin's
# capabilities (tests/portal checks what it may do): walking every page again for it would
# add only time.
WALKERS = [
    (Role.VIEWER, False),
    (Role.REQUESTER, False),
    (Role.APPROVER, False),
    (Role.POOL_ADMIN, True),
]


@pytest.fixture(scope="module")
def walk_browser() -> Iterator[Any]:
    """One Chromium for the whole walk; each role gets its own context (its own session)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = test_browser.launch_chromium(playwright)
        yield browser
        browser.close()


def walker(role: Role) -> User:
    user = user_in(role.value, f"walk-{role.value}")
    user.set_password(PASSWORD)
    user.save()
    return user


def check_refusal(watched: Watched, status: int, capability: Capability, where: str) -> None:
    """The site's 403 page (its navigation, its layout) saying which role the page needs."""
    page = watched.page
    assert status == 403, where
    assert page.locator('[data-status="403"]').count() == 1, where
    assert page.locator(".error-reason").inner_text() == refusal_reason(capability), where
    assert page.locator("header.topbar .mainnav a").count() > 0, where


def check_fits(watched: Watched, where: str) -> None:
    """No sideways page scroll; every navigation link sits on the bar (not white on white),
    or, on the API docs, a link back to the portal."""
    page = watched.page
    assert watched.no_sideways_scroll(), (where, watched.too_wide())
    if page.locator("header.topbar").count() == 0:  # the API docs: Swagger UI's own page
        assert page.locator('nav.portal-back a[href="/"]').count() == 1, where
        return
    below = page.evaluate(
        """() => { const bar = document.querySelector('header.topbar').getBoundingClientRect();
        return [...document.querySelectorAll('.mainnav a')]
          .filter(a => a.getBoundingClientRect().bottom > bar.bottom + 1)
          .map(a => a.textContent.trim()); }"""
    )
    assert below == [], (where, below)


def _booking_ahead(now: datetime) -> int:
    """Two bookings on the calendar: one approved (solid), one waiting (dashed)."""
    asked = [
        bookings.booking_ask(
            user=user_in("requesters", "rita"),
            source=Pool.objects.get(name="mixed"),
            destination=Pool.objects.get(name="training"),
            team="vision",
            node_names=[name],
            starts_at=now + timedelta(days=days),
            ends_at=now + timedelta(days=days + 3),
            reason="evaluation run for the new vision model, with a long reason to wrap",
            now=now,
        )
        for name, days in (("a100-reserve-003", 1), ("a100-reserve-004", 2))
    ]
    bookings.booking_approve(asked[0].pk, approver=user_in("approvers", "arno"), now=now)
    return asked[1].pk


def _maintenance_under_way() -> int:
    """A maintenance with a wave drained and waiting for its step, and a budget's refusal
    (long words) on a node still to come: its page at its fullest."""
    maintenance = waves.maintenance_start(
        pool=Pool.objects.get(name="training"),
        user=user_in("pool-admins", "paula"),
        reason="driver 570 on the training nodes (CHG-1234)",
        wave_size=1,
        step="driver upgraded",
        nodes=["a100-train-001", "a100-train-002"],
    )
    Maintenance.objects.filter(pk=maintenance.pk).update(
        wave=1, waiting="wave 1 drained: waiting for 'driver upgraded' to be confirmed"
    )
    rows = MaintenanceNode.objects.filter(maintenance=maintenance)
    rows.filter(node__name="a100-train-001").update(wave=1, state="held", cordoned_by_portal=True)
    refusal = (
        "Cannot evict pod as it would violate the pod's disruption budget. The disruption "
        "budget llm-pretrain-budget-with-a-long-name needs 4 healthy pods and has 4 currently"
    )
    rows.filter(node__name="a100-train-002").update(
        refusals={"ml-training/llm-pretrain-worker-0": {"message": refusal, "next_try": 0}}
    )
    return maintenance.pk


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("role", "dark"),
    WALKERS,
    ids=[f"{r.value}{'-dark' if d else ''}" for r, d in WALKERS],
)
def test_every_page_in_every_role_fits_phone_and_desktop_without_errors(
    stack: Any, live_server: Any, settings: Any, walk_browser: Any, role: Role, dark: bool
) -> None:
    sim, prom = stack
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.PROMETHEUS_URL = prom.url
    # Figures and insights kept for the walk: it measures the pages, not Prometheus.
    settings.METRICS_CACHE_SECONDS = 300
    settings.INSIGHTS_CACHE_SECONDS = 300
    inventory_sync()
    now = timezone.now()
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000", "a100-reserve-001"],
        destination=Pool.objects.get(name="training"),
        reason="more training capacity for the launch",
        loan_until=now + timedelta(days=3),
        now=now,
    )
    maintenance = _maintenance_under_way()
    booking = _booking_ahead(now)
    reclaim = reclaim_row(
        "mixed",
        namespace="research",
        pod="notebook-a100-reserve-000-0",
        uid="walk-notebook",
        node="a100-reserve-000",
        state=Reclaim.State.REQUESTED,
        requested_by=user_in("requesters", "rita"),
        requested_at=now,
    ).pk
    user = walker(role)
    context = walk_browser.new_context(viewport=DESKTOP, color_scheme="dark" if dark else "light")
    watched = Watched(context)
    watched.log_in(live_server.url, user.username, PASSWORD)
    page = watched.page
    for path, capability in PAGES:
        ids = {"move": move.pk, "maintenance": maintenance, "booking": booking, "reclaim": reclaim}
        url = f"{live_server.url}{path.format(**ids)}"
        expected = 403 if path in REFUSED[role] else 200
        watched.expect_status(url, expected)
        page.set_viewport_size(DESKTOP)
        response = page.goto(url, wait_until="load")
        assert response is not None
        where = f"{path} as {user.username}"
        if path.startswith("/pools/mixed/calendar/"):  # its script places each bar
            placed = page.eval_on_selector_all(
                ".calendar-bar", "bars => bars.map(b => [b.style.left, b.style.width])"
            )
            assert len(placed) == 2 and all(left and width for left, width in placed), placed
        if path == "/api/docs/":  # Swagger UI fetches the schema once its script has run
            page.wait_for_selector(".swagger-ui .info .title", timeout=20_000)
        if expected == 403:
            check_refusal(watched, response.status, capability, where)
        else:
            assert response.status == 200, where
        check_fits(watched, f"{where} at 1400 px")
        # The same page at a phone's width. No script of the portal reads the width (the
        # layout is the style sheet's media queries), so a resize lays the page out as a
        # phone loading it would, without a second load.
        page.set_viewport_size(PHONE)
        check_fits(watched, f"{where} at 390 px")
    context.close()
    assert watched.problems == [], watched.problems
