"""Text on the pages, in headless Chromium (Debian's) driven by Playwright, on the database
alone (no cluster, no Prometheus): long user text wraps instead of widening the page, and
at a phone's width words and label keys stay whole."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from pools import moves
from pools.models import FREE_TEXT_MAX_LENGTH, Pool
from tests.e2e import test_browser
from tests.e2e.test_browser import DESKTOP, PHONE
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

pytestmark = test_browser.pytestmark
chromium_browser = test_browser.chromium_browser
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
PASSWORD = "read-the-long-words-1"
# The longest text the portal takes, as one word: the hardest to wrap.
WORD = "capacity" * (FREE_TEXT_MAX_LENGTH // len("capacity"))


@pytest.fixture
def signed_in(live_server: Any, chromium_browser: Any) -> Iterator[Any]:
    demo_inventory()
    User.objects.create_superuser("ada", email="ada@example.com", password=PASSWORD)
    page = chromium_browser.new_page(viewport=DESKTOP)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    yield page
    page.close()


# The widest box of text holding `word` (its own box, not its element's, which a word that
# does not wrap overflows), the viewport's width and the page's scroll width. A table may
# scroll in its own box on a phone; the text in it wraps all the same.
WIDEST_TEXT = """(word) => { const w = document.documentElement.clientWidth; let widest = 0;
  const walk = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (!n.textContent.includes(word)) continue;
    const range = document.createRange(); range.selectNodeContents(n);
    widest = Math.max(widest, range.getBoundingClientRect().width);
  } return [widest, w, document.documentElement.scrollWidth]; }"""


@pytest.mark.django_db(transaction=True)
def test_the_longest_reason_wraps_on_every_page_that_shows_it(
    live_server: Any, signed_in: Any
) -> None:
    page = signed_in
    now = timezone.now()
    training = Pool.objects.get(name="training")
    training.description = WORD
    training.save()
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=training,
        reason=WORD,
        health_override=WORD,
        loan_until=now + timedelta(days=1),
        now=now,
    )
    moves.move_decide(
        move=move,
        user=user_in("approvers", "arno"),
        action=moves.Action.REJECT,
        reason=WORD,
        until=None,
        now=now,
    )
    pages = [
        f"/moves/{move.pk}/",
        "/audit/",
        "/pools/training/",
        "/moves/?state=all",
        "/nodes/a100-reserve-000/",
        f"/search/?q=%23{move.pk}",
    ]
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        for path in pages:
            page.goto(f"{live_server.url}{path}")
            text, width, scroll = page.evaluate(WIDEST_TEXT, WORD[:40])
            assert text > 0, f"{path}: the text is not shown"
            assert text <= width and scroll <= width, (path, viewport, text, width, scroll)


@pytest.mark.django_db(transaction=True)
def test_a_live_part_that_ended_says_when_as_the_pages_write_times(
    live_server: Any, signed_in: Any, settings: Any
) -> None:
    settings.LIVE_REFRESH_SECONDS = 1
    page = signed_in
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=Pool.objects.get(name="training"),
        reason="more capacity",
        now=timezone.now(),
    )
    page.goto(f"{live_server.url}/moves/{move.pk}/")
    moves.move_decide(
        move=move,
        user=user_in("requesters", "rita"),
        action=moves.Action.CANCEL,
        reason="",
        until=None,
        now=timezone.now(),
    )
    page.wait_for_selector("#move-live[data-live-stopped]", timeout=20_000)
    said = page.locator("[data-live-age]").inner_text()
    # Y-m-d H:i:s, as the server writes times, not the browser's locale ("7:20:46 PM").
    assert re.fullmatch(r"Final: updated at \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", said), said


# For each element matched: its text, how many lines it takes, and its width.
LINES = """(selector) => [...document.querySelectorAll(selector)].map(e => {
  const range = document.createRange(); range.selectNodeContents(e);
  const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
  return [e.textContent, tops.size, e.getBoundingClientRect().width]; })"""
# Every word of the matched elements' text, as laid out: (text, lines it takes). A word is
# a piece between the line-break opportunities the page gives (<wbr>), so a text node.
WORDS = """(selector) => [...document.querySelectorAll(selector)].flatMap(e => {
  const walk = document.createTreeWalker(e, NodeFilter.SHOW_TEXT); const out = [];
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const range = document.createRange(); range.selectNodeContents(n);
    out.push([n.textContent,
              new Set([...range.getClientRects()].map(r => Math.round(r.top))).size]);
  } return out; })"""


@pytest.mark.django_db(transaction=True)
def test_at_a_phones_width_fit_verdicts_read_as_lines_and_label_keys_stay_whole(
    live_server: Any, signed_in: Any
) -> None:
    from tests.fit.test_service import TRAINING_POD

    page = signed_in
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/fit/")
    page.fill("#id_manifest", TRAINING_POD)
    page.click("#fit-form button[type=submit]")
    page.wait_for_selector("#fit-result")
    for text, lines, width in page.evaluate(LINES, "#fit-result code.scheduler-message"):
        # A sentence a line can hold 30 characters or more, not 9 (390 px, less the margins).
        assert len(text) / lines >= 30, (text, lines, width)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]

    page.goto(f"{live_server.url}/nodes/a100-reserve-000/")
    # Each key's words (its text between dots and slashes) on one line each: a key may wrap
    # at a dot or a slash, never inside a word ("nvi dia .co m/m ig.").
    words = page.evaluate(WORDS, "table.kv.labels code")
    assert "nvidia." in [text for text, _ in words]  # nvidia.com/gpu.product, in words
    split = [(text, lines) for text, lines in words if lines > 1]
    assert split == [], split
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


@pytest.mark.django_db(transaction=True)
def test_a_pools_longest_name_wraps_on_the_pages_that_show_it(
    live_server: Any, signed_in: Any
) -> None:
    name = "Reserve" * (Pool._meta.get_field("display_name").max_length // len("Reserve"))
    Pool.objects.filter(name="mixed").update(display_name=name)
    page = signed_in
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        for path in ["/", "/pools/", "/pools/mixed/", "/nodes/a100-reserve-000/"]:
            page.goto(f"{live_server.url}{path}")
            text, width, scroll = page.evaluate(WIDEST_TEXT, name[:40])
            assert text > 0, f"{path}: the name is not shown"
            assert text <= width and scroll <= width, (path, viewport, text, width, scroll)


@pytest.mark.django_db(transaction=True)
def test_a_tokens_longest_name_wraps(live_server: Any, signed_in: Any) -> None:
    from pools.models import ApiToken
    from pools.tokens import token_create

    name = "pipeline" * (ApiToken._meta.get_field("name").max_length // len("pipeline"))
    token_create(user=User.objects.get(username="ada"), name=name)
    page = signed_in
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/tokens/")
    text, width, scroll = page.evaluate(WIDEST_TEXT, name[:40])
    assert 0 < text <= width and scroll <= width, (text, width, scroll)
