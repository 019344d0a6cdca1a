"""A re-list writes only what changed: a pod row already holding the pod's resourceVersion
is not written again, nor a node the watcher already holds as listed; a pod the list no
longer shows is marked deleted, a node gone."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.core.insights.readiness import Status
from pools.insights import gather
from pools.inventory.watch import WatchState, flush, nodes_relist, pods_relist
from pools.kube.watching import list_pages
from pools.models import GpuPod, Node, Pool
from tests.edges.inventory.test_inventory import statements
from tests.kubesim_process import Kubesim
from tests.real_cluster import RealCluster

# The cluster is kubesim's API server, then the real control plane.
pytestmark = pytest.mark.both_backends


def pod_rows_written(captured: CaptureQueriesContext) -> int:
    """Rows sent to the pod upsert; an `executemany` is logged as "N times: SQL"."""
    return sum(
        int(q["sql"].split(" times: ", 1)[0])
        for q in captured.captured_queries
        if " times: INSERT INTO" in q["sql"] and "pools_gpupod" in q["sql"]
    )


def stamps() -> dict[str, object]:
    return dict(GpuPod.objects.values_list("uid", "updated_at"))


@pytest.mark.django_db
def test_a_relist_writes_only_the_pods_that_changed(cluster: Kubesim) -> None:
    state, leading = WatchState(), threading.Event()
    leading.set()
    nodes_relist(state)
    with CaptureQueriesContext(connection) as first:
        pods_relist(state, leading)
    assert pod_rows_written(first) == GpuPod.objects.count() == 36
    before = stamps()
    with CaptureQueriesContext(connection) as unchanged:
        pods_relist(state, leading)
    assert pod_rows_written(unchanged) == 0
    assert stamps() == before

    relabelled, vanished = GpuPod.objects.order_by("name")[:2]
    core = cluster.core()
    core.patch_namespaced_pod(
        relabelled.name, relabelled.namespace, {"metadata": {"labels": {"team": "vision"}}}
    )
    core.delete_namespaced_pod(vanished.name, vanished.namespace, grace_period_seconds=0)
    with CaptureQueriesContext(connection) as changed:
        pods_relist(state, leading)
    # On a real cluster the deleted pod's controller replaces it: a new row, not a rewrite.
    replacements = GpuPod.objects.exclude(uid__in=before).count()
    assert pod_rows_written(changed) == 1 + replacements
    after = stamps()
    assert [uid for uid in before if after[uid] != before[uid]] == [relabelled.uid]
    relabelled.refresh_from_db()
    vanished.refresh_from_db()
    assert (relabelled.team, relabelled.deleted_at) == ("vision", None)
    assert vanished.deleted_at is not None
    assert GpuPod.objects.filter(deleted_at__isnull=False).count() == 1


def versions(state: WatchState) -> dict[str, str]:
    return {name: snapshot.resource_version for name, snapshot in state.nodes.items()}


def relisted_unchanged(
    state: WatchState, now: datetime | None = None, attempts: int = 5
) -> CaptureQueriesContext:
    """The statements of a re-list (and its flush at `now`) during which no node changed.
    On the real control plane a kubelet may post a node's status between two lists (a new
    resourceVersion, and the row follows): such a re-list is taken again."""
    for _ in range(attempts):
        before = versions(state)
        with CaptureQueriesContext(connection) as captured:
            nodes_relist(state)
            flush(state.take(), now or timezone.now())
        if versions(state) == before:
            return captured
    pytest.fail(f"a node changed during each of {attempts} re-lists")


@pytest.mark.django_db
def test_a_relist_writes_only_the_nodes_that_changed_and_marks_the_vanished_gone(
    cluster: Kubesim,
) -> None:
    state = WatchState()
    nodes_relist(state)
    flush(state.take(), timezone.now())
    assert Node.objects.present().count() == 25
    unchanged = relisted_unchanged(state)
    assert "INSERT pools_node" not in statements(unchanged)
    # One statement moves every present node's last_seen on, not a row written per node.
    assert statements(unchanged)["UPDATE pools_node"] == 1
    assert not any(" times: UPDATE" in q["sql"] for q in unchanged.captured_queries)

    core = cluster.core()
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "training"}}})
    core.delete_node("gpu-new-001")
    # A row the state never held (left by an earlier process) whose node is not listed.
    Node.objects.create(name="from-before", last_seen=timezone.now())
    before = versions(state)
    with CaptureQueriesContext(connection) as changed:
        nodes_relist(state)
        flush(state.take(), timezone.now())
    # The relabelled node's row alone; on the real control plane also the row of a node
    # whose status its kubelet posted meanwhile (kubesim's posts none).
    moved = {name for name, version in versions(state).items() if before.get(name) != version}
    assert "gpu-new-000" in moved
    if not isinstance(cluster, RealCluster):
        assert moved == {"gpu-new-000"}
    upsert = next(q["sql"] for q in changed.captured_queries if "INSERT INTO" in q["sql"])
    assert upsert.startswith(f"{len(moved)} times: ")
    assert Node.objects.get(name="gpu-new-000").pool_label == "training"
    gone = Node.objects.filter(gone_at__isnull=False).values_list("name", flat=True)
    assert sorted(gone) == ["from-before", "gpu-new-001"]


@pytest.mark.django_db
def test_a_relist_of_an_unchanged_cluster_moves_last_seen_on_in_one_statement(
    cluster: Kubesim, settings
) -> None:  # type: ignore[no-untyped-def]
    """The watcher's re-list writes no row for an unchanged node, yet the inventory saw it:
    its last_seen moves on (node page, CSV), and readiness does not call it unseen."""
    state = WatchState()
    nodes_relist(state)
    first = timezone.now()
    flush(state.take(), first)
    later = first + timedelta(seconds=3 * settings.INVENTORY_SYNC_SECONDS)
    unchanged = relisted_unchanged(state, later)
    written = {
        k: n for k, n in statements(unchanged).items() if k.split()[0] in ("INSERT", "UPDATE")
    }
    assert written == {"UPDATE pools_node": 1, "INSERT pools_inventoryversion": 1}
    assert set(Node.objects.present().values_list("last_seen", flat=True)) == {later}

    for pool in Pool.objects.active():
        checks = {c.name: c for c in gather.pool_readiness(pool, now=later)}
        assert checks["recognised"].status == Status.PASS, checks["recognised"].detail


@pytest.mark.django_db
def test_a_pod_event_that_changes_a_nodes_pods_moves_its_last_seen_on(cluster: Kubesim) -> None:
    state = WatchState()
    nodes_relist(state)
    first = timezone.now()
    flush(state.take(), first)
    pod = next(p for page in list_pages("pods") for p in page.items if p["spec"].get("nodeName"))
    node = pod["spec"]["nodeName"]
    state.pod_event("ADDED", pod, first)
    later = first + timedelta(minutes=1)
    flush(state.take(), later)
    assert Node.objects.get(name=node).last_seen == later
