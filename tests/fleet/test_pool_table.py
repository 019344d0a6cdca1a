"""The pool page's node table is paged on the server: 100 rows a page, the filters and the
sort kept from page to page, the pool's figures and "move all that match" over every page."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.test import Client

from pools.models import Node
from tests.factories import Group, demo_inventory, node_and_pods, store
from tests.moves_helpers import user_in

EXTRA = 250  # mixed holds ten demo nodes more: 260, three pages


@pytest.fixture
def client(db) -> Client:  # type: ignore[no-untyped-def]
    demo_inventory()
    store(node_and_pods(f"extra-{i:04d}", Group("extra", 1, "mixed")) for i in range(EXTRA))
    # Every third extra node cordoned: 84 of them match cordoned=true.
    Node.objects.filter(name__in=[f"extra-{i:04d}" for i in range(0, EXTRA, 3)]).update(
        cordoned=True
    )
    session = Client()
    session.force_login(user_in("requesters", "rita"))
    return session


def rows(html: str) -> list[str]:
    return re.findall(r'<tr data-node="([^"]+)"', html)


def get(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def every_page(client: Client, path: str) -> list[str]:
    """The rows of every page, following the "next" links from `path`."""
    seen: list[str] = []
    while True:
        html = get(client, path)
        seen += rows(html)
        following = re.search(r'<a href="([^"]+)" rel="next"', html)
        if following is None:
            return seen
        path = "/pools/mixed/" + following.group(1).replace("&amp;", "&")


def test_a_page_holds_100_rows_and_the_figures_cover_the_whole_pool(client: Client) -> None:
    names = sorted(Node.objects.filter(pool__name="mixed").values_list("name", flat=True))
    assert len(names) == EXTRA + 10
    first = get(client, "/pools/mixed/")
    assert rows(first) == names[:100]
    assert re.search(r'data-figure="nodes">260<', first)  # the pool, not the page
    assert "260 of 260 nodes match, 1\u2013100 shown" in first
    assert "page 1 of 3" in first
    assert 'data-page="previous"' not in first
    last = get(client, "/pools/mixed/?page=3")
    assert rows(last) == names[200:]
    assert "201\u2013260 shown" in last and 'data-page="next"' not in last
    # Every row links to its node's page (one address pattern, not a lookup a row).
    assert f'<a href="/nodes/{names[200]}/">{names[200]}</a>' in last
    assert every_page(client, "/pools/mixed/") == names


def test_a_page_number_out_of_range_or_not_a_number_shows_the_nearest_page(
    client: Client,
) -> None:
    names = sorted(Node.objects.filter(pool__name="mixed").values_list("name", flat=True))
    assert rows(get(client, "/pools/mixed/?page=99")) == names[200:]
    assert rows(get(client, "/pools/mixed/?page=two")) == names[:100]


def test_the_filter_and_the_sort_hold_across_pages(client: Client) -> None:
    cordoned = Node.objects.filter(pool__name="mixed", cordoned=True)
    names = sorted(cordoned.values_list("name", flat=True), reverse=True)
    assert len(names) == 84
    html = get(client, "/pools/mixed/?cordoned=true&sort=-name")
    assert "84 of 260 nodes match</span>" in html and "page 1 of" not in html  # one page
    assert rows(html) == names
    gpus_desc = every_page(client, "/pools/mixed/?ready=true&sort=-gpus")
    ready = Node.objects.filter(pool__name="mixed", ready=True)
    expected = sorted(
        ready.values_list("gpu_allocatable", "name"), reverse=True
    )  # GPUs, then name, both descending
    assert gpus_desc == [name for _, name in expected]
    # A page link keeps the filter and the sort; a sort link starts at the first page.
    second = get(client, "/pools/mixed/?ready=true&sort=-gpus&page=2")
    assert 'href="?ready=true&amp;sort=-gpus&amp;page=3" rel="next"' in second
    assert 'href="?ready=true&amp;sort=name"' in second


def test_a_sort_by_a_dcgm_figure_pages_every_matching_node(client: Client) -> None:
    # No Prometheus here: every node lacks the figure and sorts by name within it.
    names = sorted(Node.objects.filter(pool__name="mixed").values_list("name", flat=True))
    assert every_page(client, "/pools/mixed/?sort=util") == names
    assert every_page(client, "/pools/mixed/?sort=-util") == names[::-1]


def test_move_all_that_match_and_the_export_take_every_page(client: Client) -> None:
    html = get(client, "/pools/mixed/?cordoned=false&page=2")
    assert "Move all 176 matching nodes…" in html
    link = re.search(r'href="(/moves/new/\?[^"]*)" data-move-matching', html)
    assert link is not None
    form = get(client, link.group(1).replace("&amp;", "&"))
    listed = re.search(r'name="nodes"[^>]*value="([^"]*)"', form) or re.search(
        r'name="nodes"[^>]*>([^<]*)<', form
    )
    assert listed is not None
    expected = Node.objects.filter(pool__name="mixed", cordoned=False)
    assert set(listed.group(1).strip().split(",")) == set(expected.values_list("name", flat=True))
    export = re.search(r'href="(/export/[^"]*)" data-export="nodes"', html)
    assert export is not None
    body = client.get(export.group(1).replace("&amp;", "&"))
    content = b"".join(body.streaming_content) if body.streaming else body.content  # type: ignore[attr-defined]
    exported = list(csv.DictReader(io.StringIO(content.decode())))
    assert len(exported) == 176


def test_a_filter_that_does_not_parse_lists_nothing_and_says_which(client: Client) -> None:
    response = client.get("/pools/mixed/?ready=maybe&page=2")
    assert response.status_code == 400
    html = response.content.decode()
    assert rows(html) == [] and "0 of 260 nodes match" in html
    assert "Filter &#x27;ready&#x27;" in html
