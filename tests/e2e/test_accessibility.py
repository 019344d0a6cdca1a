"""Accessibility: axe-core (vendored from the npm registry, no CDN) finds no serious or
critical violation on any page, at desktop and phone widths; and the walk meets no console
error and no failed request."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from pools import moves
from pools.models import Pool
from tests.e2e import test_browser
from tests.e2e.test_browser_features import log_in
from tests.moves_helpers import user_in

stack = test_browser.stack
chromium_browser = test_browser.chromium_browser
browser_page = test_browser.browser_page
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
AXE = Path(__file__).resolve().parents[2] / "static" / "vendor" / "axe-core" / "axe.min.js"
# scripts/vendor-axe-core.sh prints it: the file is the npm registry's, unchanged.
AXE_CORE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations
    .filter(v => v.impact === "serious" || v.impact === "critical")
    .map(v => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3)
      .map(n => n.target.join(" ")).join(", ")}`);
}"""


def test_the_vendored_axe_core_is_the_published_one() -> None:
    assert hashlib.sha256(AXE.read_bytes()).hexdigest() == AXE_CORE_SHA256
    assert (AXE.parent / "LICENSE").exists()


def _pages(move_id: int) -> list[str]:
    return [
        "/",
        "/pools/training/",
        "/pools/unassigned/",
        "/nodes/a100-train-drift-000/",
        "/moves/?state=all",
        f"/moves/{move_id}/",
        "/moves/new/?node=a100-reserve-001",
        "/loans/",
        "/audit/",
        "/tokens/",
        "/search/?q=a100-infer-001",
        "/pools/new/",
        "/pools/training/edit/",
    ]


@test_browser.pytestmark[0]
@test_browser.pytestmark[1]
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1400, 390])
def test_no_serious_violations_on_any_page(
    stack: Any, live_server: Any, settings: Any, browser_page: Any, width: int
) -> None:
    sim, prom = stack
    page = browser_page
    log_in(page, live_server.url, settings, sim, prom, seconds=60)
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=Pool.objects.get(name="training"),
        reason="launch",
        now=timezone.now(),
    )
    page.set_viewport_size({"width": width, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    found = {}
    for path in _pages(move.pk):
        page.goto(f"{live_server.url}{path}")
        page.add_script_tag(url=f"{live_server.url}/static/vendor/axe-core/axe.min.js")
        violations = page.evaluate(RUN_AXE)
        if violations:
            found[path] = violations
    assert not problems, "\n".join(problems)
    report = [f"{path}: {v}" for path, violations in found.items() for v in violations]
    assert not report, "\n".join(report)
