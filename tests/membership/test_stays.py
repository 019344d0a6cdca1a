"""The stays the inventory keeps: one open stay a node, a new one only when its pool
changes or it comes back, closed when it goes; nothing written for an unchanged fleet; the
moves' records rebuilt into stays when the table was made (pools.membership.stays)."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.inventory.rows import nodes_gone, nodes_upsert
from pools.membership.stays import membership, stays_follow
from pools.models import MoveItem, MoveRequest, Node, Pool, PoolStay
from tests.factories import demo_inventory, gpu_node

pytestmark = pytest.mark.django_db


def _stays(node: str) -> list[tuple[str, bool, bool]]:
    """(pool, open?, earliest?) of each stay of the node, oldest first."""
    return [
        (s.pool_label, s.until is None, s.earliest)
        for s in PoolStay.objects.filter(node_name=node).order_by("since")
    ]


def _writes(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE"))
        and "pools_poolstay" in q["sql"]
    ]


def test_the_first_sight_of_each_node_opens_its_earliest_stay() -> None:
    nodes = demo_inventory()
    assert PoolStay.objects.filter(until__isnull=True).count() == len(nodes)
    assert _stays("a100-train-000") == [("training", True, True)]
    assert _stays("gpu-new-000") == [("", True, True)]


def test_an_unchanged_fleet_writes_no_stay() -> None:
    nodes = demo_inventory()
    later = timezone.now() + timedelta(minutes=5)
    with CaptureQueriesContext(connection) as queries:
        assert stays_follow(list(nodes), later) == 0
        assert stays_follow(None, later) == 0
    assert _writes(queries) == []


def test_a_node_that_changes_pool_closes_one_stay_and_opens_the_next() -> None:
    node = gpu_node("n1", "training")
    moved_at = timezone.now() + timedelta(hours=1)
    node.pool_label = "inference"
    node.last_seen = moved_at
    nodes_upsert([node])
    assert _stays("n1") == [("training", False, True), ("inference", True, False)]
    closed, opened = PoolStay.objects.filter(node_name="n1").order_by("since")
    assert closed.until == opened.since == moved_at


def test_a_node_that_goes_is_closed_when_it_went_and_one_that_returns_starts_again() -> None:
    gpu_node("n1", "training")
    gone_at = timezone.now() + timedelta(hours=1)
    nodes_gone(["n1"], gone_at)
    assert _stays("n1") == [("training", False, True)]
    assert PoolStay.objects.get(node_name="n1").until == gone_at
    node = Node.objects.get(name="n1")
    node.gone_at, node.last_seen = None, gone_at + timedelta(hours=1)
    nodes_upsert([node])
    # Back: a stay of its own, and not its earliest record (it was seen before).
    assert _stays("n1") == [("training", False, True), ("training", True, False)]


def test_a_second_writer_seeing_the_same_change_opens_nothing_more() -> None:
    node = gpu_node("n1", "training")
    at = timezone.now() + timedelta(hours=1)
    Node.objects.filter(pk=node.pk).update(pool_label="inference")
    stays_follow(["n1"], at)  # a move's refresh
    stays_follow(["n1"], at + timedelta(seconds=1))  # the watcher's event, a moment later
    assert _stays("n1") == [("training", False, True), ("inference", True, False)]
    with pytest.raises(IntegrityError), transaction.atomic():
        PoolStay.objects.create(node_name="n1", pool_label="x", since=at)


def test_the_window_reads_each_node_in_the_pool_it_was_in_then() -> None:
    gpu_node("n1", "training")
    gpu_node("n2", "mixed")
    lent_at = timezone.now() + timedelta(hours=1)
    Node.objects.filter(name="n2").update(pool_label="training")
    stays_follow(["n2"], lent_at)
    start, end = lent_at - timedelta(days=30), lent_at + timedelta(hours=1)
    found = membership(start, end)
    assert found.members("training", start.timestamp(), end.timestamp()) == {
        "n1": ((None, None),),
        "n2": ((lent_at.timestamp(), None),),
    }
    assert found.members("mixed", start.timestamp(), end.timestamp()) == {
        "n2": ((None, lent_at.timestamp()),)
    }


def test_a_row_written_without_the_inventory_counts_in_its_pool_all_along() -> None:
    gpu_node("n1", "training")
    PoolStay.objects.all().delete()
    now = timezone.now()
    found = membership(now - timedelta(days=7), now)
    assert found.members("training", (now - timedelta(days=7)).timestamp(), now.timestamp()) == {
        "n1": ((None, None),)
    }


def test_the_stays_are_rebuilt_from_the_moves_records_when_the_table_is_made() -> None:
    demo_inventory()
    PoolStay.objects.all().delete()
    training = Pool.objects.get(name="training")
    asked = timezone.now() - timedelta(days=10)
    finished = timezone.now() - timedelta(days=9)
    request = MoveRequest.objects.create(
        destination=training, reason="loan", state=MoveRequest.State.SUCCEEDED
    )
    MoveRequest.objects.filter(pk=request.pk).update(created_at=asked)
    spare = Node.objects.get(name="gpu-new-000")
    MoveItem.objects.create(
        request=request,
        node=spare,
        source_label="",
        planned_diff={},
        state=MoveItem.State.DONE,
        active=False,
        finished_at=finished,
    )
    Node.objects.filter(pk=spare.pk).update(pool_label="training")
    migration = importlib.import_module("pools.migrations.0018_pool_stays")
    migration.stays_from_moves(apps, None)
    stays = list(PoolStay.objects.filter(node_name="gpu-new-000").order_by("since"))
    assert [(s.pool_label, s.since, s.until, s.earliest, s.source) for s in stays] == [
        ("", asked, finished, True, "moves"),
        ("training", finished, None, False, "moves"),
    ]
    # A node no move touched: one stay, open, taken to reach back.
    assert _stays("a100-train-000") == [("training", True, True)]
