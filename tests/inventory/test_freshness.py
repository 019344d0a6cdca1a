"""How fresh the inventory is, said by every page, GET /api/v1/clusters/ and the cluster's name at
the top of each page: stale when the writer has had no answer from the API server for
INVENTORY_STALE_SECONDS while something goes wrong, or when nobody writes any more."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from pools.inventory.freshness import inventory_freshness
from pools.inventory.lease import Contact, lease_acquire, lease_renew
from pools.models import InventoryLease
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db

WATCHER = "watcher:portal-watcher-0:7"


@pytest.fixture
def page(settings) -> Client:  # type: ignore[no-untyped-def]
    settings.CLUSTER_NAME = "eu-west"
    settings.CLUSTER_COLOUR = "#1f77b4"
    settings.INVENTORY_SYNC_SECONDS = 60
    settings.INVENTORY_LEASE_SECONDS = 15
    settings.INVENTORY_STALE_SECONDS = 120
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    return client


def banner(client: Client) -> str | None:
    html = client.get("/pools/").content.decode()
    found = re.search(
        r'<div class="banner banner-bad"[^>]*data-inventory-stale[^>]*>(.*?)</div>', html
    )
    return found.group(1) if found else None


def clusters(client: Client) -> dict:  # type: ignore[type-arg]
    response = client.get("/api/v1/clusters/")
    assert response.status_code == 200
    (cluster,) = response.json()
    return cluster


def heard(seconds_ago: float, trouble: str = "") -> None:
    assert lease_acquire(WATCHER, 15)
    assert lease_renew(WATCHER, 15, Contact(seconds_ago, trouble))


def test_no_writer_yet_says_nothing(page: Client) -> None:
    assert inventory_freshness() is None
    assert banner(page) is None
    assert clusters(page)["inventory"] is None


def test_a_watcher_in_contact_is_fresh(page: Client) -> None:
    heard(3)
    assert banner(page) is None
    inventory = clusters(page)["inventory"]
    assert (inventory["stale"], inventory["why"], inventory["trouble"]) == (False, "", "")
    assert 2 <= inventory["heard_seconds_ago"] < 60 and inventory["written_seconds_ago"] < 60


def test_a_short_trouble_is_not_yet_stale(page: Client) -> None:
    heard(30, "watching pods: the API server is unreachable")
    assert banner(page) is None
    assert clusters(page)["inventory"]["stale"] is False


def test_an_api_server_silent_past_the_limit_makes_every_page_say_so(page: Client) -> None:
    heard(300, "watching nodes: the API server is unreachable (connection refused)")
    said = banner(page)
    assert said == (
        "The nodes shown may be stale: the API server of cluster eu-west has not answered "
        "for 5 min: watching nodes: the API server is unreachable (connection refused)."
    )
    inventory = clusters(page)["inventory"]
    assert inventory["stale"] is True and inventory["why"] in said
    assert 299 <= inventory["heard_seconds_ago"] < 360


def test_never_answered_and_in_trouble_is_stale(page: Client) -> None:
    assert lease_acquire(WATCHER, 15)
    assert lease_renew(WATCHER, 15, Contact(None, "listing nodes: Unauthorized"))
    assert "has not answered yet: listing nodes: Unauthorized" in (banner(page) or "")


def test_nobody_writing_is_stale(page: Client) -> None:
    heard(0)
    # The watcher stopped 20 minutes ago, and no periodic sync came (2 x 60 s + 15 s).
    InventoryLease.objects.update(renewed_at=timezone.now() - timedelta(minutes=20))
    assert banner(page) == (
        "The nodes shown may be stale: the inventory of cluster eu-west was last written "
        "20 min ago: no watcher or sync runs."
    )


def test_a_password_in_the_trouble_is_not_shown(page: Client) -> None:
    heard(600, "listing nodes: https://admin:hunter2@10.0.0.1:6443 refused")
    assert "hunter2" not in (banner(page) or "hunter2")
    assert "hunter2" not in clusters(page)["inventory"]["trouble"]


def test_every_page_names_its_cluster(page: Client, settings) -> None:  # type: ignore[no-untyped-def]
    html = page.get("/").content.decode()
    chip = re.search(r'<span class="cluster-name" data-cluster="eu-west"[^>]*>(.*?)</span>', html)
    assert chip and chip.group(1).strip().endswith("eu-west")
    assert 'fill="#1f77b4"' in chip.group(1)
    assert clusters(page)["name"] == "eu-west" and clusters(page)["colour"] == "#1f77b4"


def test_the_clusters_api_needs_a_login() -> None:
    response = Client().get("/api/v1/clusters/")
    assert response.status_code in (401, 403)
