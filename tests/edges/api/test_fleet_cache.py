"""The node list's kept pages (pools/api/fleet_cache.py): the same answer as a page made
afresh, no node SQL for a kept one, every inventory write shown on the next request (the
inventory's version is a database row, so this holds with or without Redis), and the
credentials and role still checked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpResponse
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.api.fleet_cache import RenderedPages
from pools.common.guarded_cache import caches_setting
from pools.common.roles import Capability, refusal_reason
from pools.inventory import drift_recompute, inventory_refresh_nodes
from pools.inventory.watch import WatchState, flush
from pools.models import Pool
from pools.tokens import token_create
from tests.api.conftest import api
from tests.factories import demo_inventory, pool_labels, raw_node
from tests.moves_helpers import user_in
from tests.servers import redis_server

NODES = "/api/v1/nodes/"
NODE = "a100-train-000"


@pytest.fixture
def shared_cache(settings, tmp_path: Path) -> Iterator[None]:  # type: ignore[no-untyped-def]
    with redis_server(tmp_path) as redis:
        settings.CACHES = caches_setting(f"redis://127.0.0.1:{redis.port}/0")
        yield


@pytest.fixture
def viewer(db, settings) -> Callable[..., object]:  # type: ignore[no-untyped-def]
    settings.API_TOKEN_CACHE_SECONDS = 60
    demo_inventory()
    return api(token_create(user=user_in("viewers", "vera"), name="script")[1])


def node_queries(client, path: str = NODES, **headers: str) -> tuple[object, int]:  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path, **headers)
    assert response.status_code == 200, response.content[:300]
    return response, sum("pools_node" in q["sql"] for q in captured.captured_queries)


def headers_of(response) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {k: v for k, v in response.items() if k != "X-Request-ID"}


def node_of(response, name: str = NODE) -> dict[str, object]:  # type: ignore[no-untyped-def]
    return next(n for n in response.json()["results"] if n["name"] == name)


def test_a_kept_page_is_the_same_answer_without_a_query(viewer, settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    made, queries = node_queries(viewer)  # the in-process cache: pages are kept too
    assert queries == 1 and node_queries(viewer)[1] == 0
    with redis_server(tmp_path) as redis:
        settings.CACHES = caches_setting(f"redis://127.0.0.1:{redis.port}/0")
        first, queries = node_queries(viewer)
        assert queries == 1
        kept, queries = node_queries(viewer)
        assert queries == 0
        assert kept.content == first.content == made.content
        assert headers_of(kept) == headers_of(first) == headers_of(made)
        # Each URL is its own page: another size, the next page, a filter.
        small, queries = node_queries(viewer, f"{NODES}?page_size=10")
        assert queries == 1 and len(small.json()["results"]) == 10
        following, queries = node_queries(viewer, small.json()["next"])
        assert queries == 1
        assert following.json()["results"][0]["name"] > small.json()["results"][-1]["name"]
        assert node_queries(viewer, f"{NODES}?page_size=10")[0].content == small.content
        # What the client accepts: an indented answer is its own page.
        indented, queries = node_queries(viewer, HTTP_ACCEPT="application/json; indent=4")
        assert queries == 1 and indented.content != kept.content
        assert indented.json() == kept.json()
        # Another host name: the links in the page name it.
        other_host = node_queries(viewer, f"{NODES}?page_size=10", HTTP_HOST="localhost")[0]
        assert "http://localhost/" in other_host.json()["next"]


def written(django_capture_on_commit_callbacks, write: Callable[[], object]) -> None:  # type: ignore[no-untyped-def]
    # The version moves when the write commits; the test's transaction never does.
    with django_capture_on_commit_callbacks(execute=True):
        write()


def test_every_inventory_write_shows_on_the_next_request(  # type: ignore[no-untyped-def]
    shared_cache, viewer, django_capture_on_commit_callbacks
) -> None:
    labels, taints = pool_labels("inference")
    assert node_of(node_queries(viewer)[0])["pool"] == "training"
    assert node_queries(viewer)[1] == 0  # kept
    # The watcher relabels the node (an operator's kubectl label).
    state = WatchState()
    state.node_event("MODIFIED", raw_node(NODE, labels=labels, taints=taints))
    written(django_capture_on_commit_callbacks, lambda: flush(state.take(), timezone.now()))
    response, queries = node_queries(viewer)
    assert queries == 1 and node_of(response)["pool"] == "inference"
    # A move's refresh of the nodes it changed.
    labels, taints = pool_labels("training")
    raw = raw_node(NODE, labels=labels, taints=taints)
    written(django_capture_on_commit_callbacks, lambda: inventory_refresh_nodes([raw]))
    assert node_of(node_queries(viewer)[0])["pool"] == "training"
    # A pool edited: its nodes show as drifted.
    assert node_queries(viewer)[1] == 0
    Pool.objects.filter(name="training").update(labels={"tier": "gold"})
    written(django_capture_on_commit_callbacks, drift_recompute)
    assert node_of(node_queries(viewer)[0])["drifted"] is True
    # The node is deleted from the cluster.
    state = WatchState()
    state.gone |= {NODE}
    written(django_capture_on_commit_callbacks, lambda: flush(state.take(), timezone.now()))
    assert node_of(node_queries(viewer)[0])["gone"] is True


def test_a_write_shows_without_a_shared_cache(viewer) -> None:  # type: ignore[no-untyped-def]
    # Local memory only: the version that keys the pages lives in the database.
    node_queries(viewer)
    assert node_queries(viewer)[1] == 0
    state = WatchState()
    state.gone |= {NODE}
    flush(state.take(), timezone.now())
    response, queries = node_queries(viewer)
    assert queries == 1 and node_of(response)["gone"] is True


def test_new_figures_make_a_new_page(shared_cache, viewer, settings) -> None:  # type: ignore[no-untyped-def]
    settings.METRICS_CACHE_SECONDS = 1
    settings.METRICS_STALE_SECONDS = 0  # no grace: the request waits for new figures
    node_queries(viewer)
    assert node_queries(viewer)[1] == 0
    time.sleep(1.05)  # the figures' entry expires: the next request makes new ones
    assert node_queries(viewer)[1] == 1


def test_a_kept_page_still_asks_for_credentials_and_a_role(shared_cache, viewer) -> None:  # type: ignore[no-untyped-def]
    node_queries(viewer)
    assert node_queries(viewer)[1] == 0
    assert api().get(NODES).status_code == 401
    assert api("gpp_not-a-token").get(NODES).status_code == 401
    nobody = User.objects.create(username="no-role")
    refused = api(token_create(user=nobody, name="x")[1]).get(NODES)
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == refusal_reason(Capability.VIEW)


def test_threads_asking_for_a_new_page_at_once_render_it_once() -> None:
    """When a version moves, every thread of a web process asks for the new page at the
    same moment: one renders it, the others get its bytes."""
    pages = RenderedPages()
    key = ("http://testserver/api/v1/nodes/", "application/json", 7, 1.5)
    renders: list[int] = []
    start = threading.Barrier(8)

    def render() -> HttpResponse:
        renders.append(1)
        time.sleep(0.2)  # long enough for every other thread to arrive meanwhile
        return HttpResponse(b'{"count": 1}', content_type="application/json")

    answers: list[bytes] = []

    def ask() -> None:
        start.wait()
        answers.append(pages.kept_or_made(key, render).content)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert answers == [b'{"count": 1}'] * 8
    assert len(renders) == 1
    # An answer that is not a page is not kept: the next request renders again.
    refused = HttpResponse(b"{}", status=400, content_type="application/json")
    other = (*key[:2], 8, 1.5)
    assert pages.kept_or_made(other, lambda: refused).status_code == 400
    assert pages.get(other) is None
