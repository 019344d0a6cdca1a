"""Selecting rows in Chromium: shift-click ticks a range, the header box the whole page, and
the ticked moves are approved in one step."""

from __future__ import annotations

import pytest

from pools.models import MoveRequest
from tests.e2e.test_browser import DESKTOP, Watched, chromium_browser, pytestmark  # noqa: F401
from tests.factories import demo_inventory
from tests.moves.test_bulk_decisions import ask
from tests.moves_helpers import user_in

PASSWORD = "tick-the-range-1"


@pytest.mark.django_db(transaction=True)
def test_shift_click_ticks_a_range_and_the_range_is_approved(
    live_server,
    chromium_browser,  # type: ignore[no-untyped-def]  # noqa: F811
) -> None:
    demo_inventory()
    rita = user_in("requesters", "rita")
    moves = [ask(rita, f"a100-reserve-{i:03d}") for i in range(5)]
    approver = user_in("approvers", "arno")
    approver.set_password(PASSWORD)
    approver.save()
    watched = Watched(chromium_browser, viewport=DESKTOP)
    watched.log_in(live_server.url, "arno", PASSWORD)
    page = watched.page
    page.goto(f"{live_server.url}/moves/")
    box = "input[data-select=move][value='{}']".format
    newest_first = sorted(moves, key=lambda m: -m.pk)  # the list's order
    page.click(box(newest_first[1].pk))
    page.click(box(newest_first[3].pk), modifiers=["Shift"])
    ticked = page.eval_on_selector_all(
        "input[data-select=move]:checked", "boxes => boxes.map(b => Number(b.value))"
    )
    assert ticked == [m.pk for m in newest_first[1:4]]
    page.click("button:text('Approve selected')")
    page.wait_for_url(f"{live_server.url}/moves/")
    approved = set(MoveRequest.objects.filter(state="approved").values_list("pk", flat=True))
    assert approved == {m.pk for m in newest_first[1:4]}
    # The header box ticks every box of the page, and clears them again.
    page.goto(f"{live_server.url}/moves/")
    page.click("input[data-select-all=move]")
    assert page.locator("input[data-select=move]:checked").count() == 2
    page.click("input[data-select-all=move]")
    assert page.locator("input[data-select=move]:checked").count() == 0
    assert watched.problems == [], watched.problems


@pytest.mark.django_db(transaction=True)
def test_on_a_pool_page_a_shift_click_range_goes_to_the_move_form(
    live_server,
    chromium_browser,  # type: ignore[no-untyped-def]  # noqa: F811
) -> None:
    demo_inventory()
    requester = user_in("requesters", "rob")
    requester.set_password(PASSWORD)
    requester.save()
    watched = Watched(chromium_browser, viewport=DESKTOP)
    watched.log_in(live_server.url, "rob", PASSWORD)
    page = watched.page
    page.goto(f"{live_server.url}/pools/mixed/")
    nodes = page.eval_on_selector_all("input[data-select=node]", "boxes => boxes.map(b => b.value)")
    assert len(nodes) == 10  # nine reserve nodes and the one down
    page.click("input[data-select-all=node]")
    assert page.locator("input[data-select=node]:checked").count() == 10
    page.click("input[data-select-all=node]")
    page.click(f"input[data-select=node][value='{nodes[2]}']")
    page.click(f"input[data-select=node][value='{nodes[5]}']", modifiers=["Shift"])
    page.click("button:text('Move selected nodes…')")
    page.wait_for_url("**/moves/new/**")
    form = page.input_value("[name=nodes]")
    assert form.split(",") == nodes[2:6]
    assert watched.problems == [], watched.problems
