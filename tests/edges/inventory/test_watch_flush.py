"""The watcher's writes: a flush costs the same statements for 2 changes as for 50, and the
periodic full sync defers to a watcher that holds the lease."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools import tasks
from pools.inventory.watch import WatchState, flush
from pools.kube.watching import list_pages
from pools.models import GpuPod, InventoryLease, Node
from tests.edges.inventory.test_inventory import statements
from tests.kubesim_process import Kubesim

# The cluster is kubesim's API server, then the real control plane.
pytestmark = pytest.mark.both_backends


def writes(captured: CaptureQueriesContext) -> dict[str, int]:
    return {k: v for k, v in statements(captured).items() if "SAVEPOINT" not in k}


def state_with(nodes: list[dict], pods: list[dict]) -> WatchState:  # type: ignore[type-arg]
    state = WatchState()
    for raw in nodes:
        state.node_event("ADDED", raw)
    for raw in pods:
        state.pod_event("ADDED", raw, timezone.now())
    return state


@pytest.mark.django_db
def test_a_flush_costs_the_same_statements_whatever_its_size(cluster: Kubesim) -> None:
    nodes = [n for page in list_pages("nodes") for n in page.items]
    pods = [p for page in list_pages("pods") for p in page.items]
    gpu_pods = [p for p in pods if "nvidia.com/gpu" in str(p["spec"]["containers"])]
    small = state_with(nodes[:2], gpu_pods[:2])
    small.pod_event("DELETED", gpu_pods[3], timezone.now())
    small.gone |= {"old-node-1"}
    large = state_with(nodes, gpu_pods)
    large.gone |= {f"old-node-{i}" for i in range(50)}
    with CaptureQueriesContext(connection) as few:
        flush(small.take(), timezone.now())
    with CaptureQueriesContext(connection) as many:
        flush(large.take(), timezone.now())
    assert (Node.objects.count(), GpuPod.objects.count()) == (25, 36)
    assert GpuPod.objects.filter(deleted_at__isnull=False).count() == 0  # rewritten by `large`
    # Pools read once; one upsert of nodes, one of pods (deleted ones too), one update for
    # newly bound pods' pool, one for gone nodes, and the inventory's version raised by each
    # of the two node writes (the savepoints are the test's own). The nodes written are
    # compared with their open stays (two reads, and two for the gone ones), and the new ones
    # get theirs (one insert, after reading which had any).
    fixed = {"SELECT pools_pool": 1, "UPDATE pools_gpupod": 1, "UPDATE pools_node": 1}
    assert writes(few) == {
        **fixed,
        "INSERT pools_node": 1,
        "INSERT pools_inventoryversion": 2,
        "INSERT pools_gpupod": 1,
        "SELECT pools_node": 2,
        "SELECT pools_poolstay": 3,
        "INSERT pools_poolstay": 1,
    }
    assert writes(many) == writes(few)


@pytest.mark.django_db
def test_a_pod_that_came_and_went_between_two_flushes_keeps_its_row(cluster: Kubesim) -> None:
    nodes = [n for page in list_pages("nodes") for n in page.items]
    pod = next(
        p
        for page in list_pages("pods")
        for p in page.items
        if p["metadata"]["name"] == "chat-serving-a100-infer-000-0"
    )
    state = state_with(nodes, [pod])
    state.pod_event("DELETED", pod, timezone.now())
    flush(state.take(), timezone.now())
    row = GpuPod.objects.get(name="chat-serving-a100-infer-000-0")
    assert row.deleted_at is not None
    assert (row.pool_label, row.gpus) == ("inference", 2)
    # The state was told of no other pod on the node: it holds nothing any more.
    assert Node.objects.get(name="a100-infer-000").gpu_allocated == 0


@pytest.mark.django_db
def test_the_periodic_sync_runs_under_the_lease_when_no_watcher_holds_it(
    cluster: Kubesim,
) -> None:
    past = timezone.now() - timedelta(minutes=5)
    InventoryLease.objects.create(name="inventory", holder="watcher:dead:1", expires_at=past)
    assert "25 GPU nodes" in tasks.sync_inventory()
    lease = InventoryLease.objects.get()
    assert lease.holder == "" and lease.expires_at < timezone.now()  # released
    assert Node.objects.count() == 25


@pytest.mark.django_db
def test_the_periodic_sync_skips_while_another_sync_holds_the_lease(cluster: Kubesim) -> None:
    later = timezone.now() + timedelta(minutes=5)
    InventoryLease.objects.create(name="inventory", holder="sync:other:7", expires_at=later)
    assert tasks.sync_inventory() == "skipped: sync:other:7 holds the inventory lease"
    assert not Node.objects.exists()
    assert cluster.count("list", resource="nodes") == 0


@pytest.mark.django_db
def test_a_flush_of_pod_changes_writes_only_the_pod_columns_of_their_nodes(
    cluster: Kubesim,
) -> None:
    nodes = [n for page in list_pages("nodes") for n in page.items]
    pod = next(
        p
        for page in list_pages("pods")
        for p in page.items
        if p["metadata"]["name"] == "chat-serving-a100-infer-000-0"
    )
    state = state_with(nodes, [])
    flush(state.take(), timezone.now())
    Node.objects.filter(name="a100-infer-000").update(labels={"kept": "as written"})
    state.pod_event("ADDED", pod, timezone.now())
    with CaptureQueriesContext(connection) as narrow:
        flush(state.take(), timezone.now())
    # The node's row: one narrow update of its pod columns, not the whole row (its GPUs
    # allocated change the pool's figures: the inventory's version is raised).
    assert writes(narrow) == {
        "SELECT pools_pool": 1,
        "UPDATE pools_node": 1,
        "INSERT pools_inventoryversion": 1,
        "INSERT pools_gpupod": 1,
        "UPDATE pools_gpupod": 1,
    }
    update = next(q["sql"] for q in narrow.captured_queries if 'UPDATE "pools_node"' in q["sql"])
    assert update.startswith("1 times: ")
    assert '"pods" = ' in update and '"labels"' not in update
    row = Node.objects.get(name="a100-infer-000")
    assert (row.gpu_allocated, row.labels) == (2, {"kept": "as written"})
    assert [p["name"] for p in row.pods] == ["chat-serving-a100-infer-000-0"]
    # The same pod again (an event that changes nothing the node's row shows): no node write.
    state.pod_event("MODIFIED", pod, timezone.now())
    with CaptureQueriesContext(connection) as unchanged:
        flush(state.take(), timezone.now())
    assert "UPDATE pools_node" not in writes(unchanged)
    assert writes(unchanged)["INSERT pools_gpupod"] == 1
