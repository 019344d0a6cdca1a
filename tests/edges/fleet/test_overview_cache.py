"""The per-pool figures are kept with the node figures under the inventory's version: a warm
overview reads no node row, and a write of node rows (which raises the version) shows on
the next request, also when the inventory watcher makes it in its own process."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from pools.inventory.version import inventory_version, inventory_version_bump
from pools.models import Node, Pool
from tests.edges.inventory.test_watch_inventory import (  # noqa: F401 (tls_cluster: a fixture)
    eventually,
    listed,
    pool_of,
    tls_cluster,
    watcher,
)
from tests.factories import demo_inventory
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in


def nodes_in(html: str, pool: str) -> int:
    card = re.search(rf'data-pool="{pool}">(.*?)</article>', html, re.S)
    assert card is not None, f"no card for {pool}"
    figure = re.search(r'data-figure="nodes">(\d+)<', card.group(1))
    assert figure is not None
    return int(figure.group(1))


def node_queries(sql: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in sql.captured_queries if '"pools_node"' in q["sql"]]


@pytest.fixture
def viewer() -> Client:
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    return client


@pytest.mark.django_db
def test_a_warm_overview_reads_no_node_row_until_the_version_changes(
    settings,  # type: ignore[no-untyped-def]
    viewer: Client,
) -> None:
    settings.METRICS_CACHE_SECONDS = 300  # the node figures stay: only the version changes
    demo_inventory()
    first = viewer.get("/").content.decode()
    training, mixed = nodes_in(first, "training"), nodes_in(first, "mixed")
    with CaptureQueriesContext(connection) as warm:
        again = viewer.get("/").content.decode()
    assert node_queries(warm) == [] and nodes_in(again, "training") == training
    # A write that does not raise the version is not seen: the figures are the cached ones
    # (every writer of node rows raises it; this one stands for a writer that forgot).
    moved = Node.objects.filter(name="a100-train-000")
    moved.update(pool=Pool.objects.get(name="mixed"), pool_label="mixed")
    stale = viewer.get("/").content.decode()
    assert (nodes_in(stale, "training"), nodes_in(stale, "mixed")) == (training, mixed)
    before = inventory_version()
    inventory_version_bump()
    assert inventory_version() == before + 1
    fresh = viewer.get("/").content.decode()
    assert (nodes_in(fresh, "training"), nodes_in(fresh, "mixed")) == (training - 1, mixed + 1)
    # The pool page takes its figures from the same entry.
    pool_page = viewer.get("/pools/training/").content.decode()
    assert re.search(rf'data-figure="nodes">{training - 1}<', pool_page)


@pytest.mark.django_db
def test_the_version_starts_at_zero_and_each_bump_is_one_statement() -> None:
    assert inventory_version() == 0
    with CaptureQueriesContext(connection) as sql:
        inventory_version_bump()
        inventory_version_bump()
    assert len(sql) == 2 and inventory_version() == 2


@pytest.mark.django_db(transaction=True)
def test_a_label_the_watcher_writes_shows_on_the_next_overview(
    settings,  # type: ignore[no-untyped-def]
    tls_cluster: Kubesim,  # noqa: F811
    tmp_path: Path,
) -> None:
    settings.METRICS_CACHE_SECONDS = 300
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    with watcher(tmp_path) as w:
        eventually(lambda: listed(w) and Node.objects.count() == 25, "the first list")
        before = client.get("/").content.decode()
        training, unassigned = nodes_in(before, "training"), nodes_in(before, "unassigned")
        assert pool_of("gpu-new-000") == ""
        subprocess.run(
            [
                *("kubectl", "--kubeconfig", str(tls_cluster.kubeconfig)),
                *("label", "node", "gpu-new-000", "gpu-pool=training"),
            ],
            check=True,
            capture_output=True,
        )
        eventually(lambda: pool_of("gpu-new-000") == "training", "the label in the row")
        after = client.get("/").content.decode()
    assert (nodes_in(after, "training"), nodes_in(after, "unassigned")) == (
        training + 1,
        unassigned - 1,
    )
