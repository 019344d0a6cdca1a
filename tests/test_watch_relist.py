"""A re-list writes only what changed: a pod row already holding the pod's resourceVersion
is not written again, nor a node the watcher already holds as listed; a pod the list no
longer shows is marked deleted, a node gone."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.inventory.watch import WatchState, flush, nodes_relist, pods_relist
from pools.models import GpuPod, Node
from tests.kubesim_process import Kubesim
from tests.test_inventory import statements

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


@pytest.mark.django_db
def test_a_relist_writes_only_the_nodes_that_changed_and_marks_the_vanished_gone(
    cluster: Kubesim,
) -> None:
    state = WatchState()
    nodes_relist(state)
    flush(state.take(), timezone.now())
    assert Node.objects.present().count() == 25
    with CaptureQueriesContext(connection) as unchanged:
        nodes_relist(state)
        flush(state.take(), timezone.now())
    assert "INSERT pools_node" not in statements(unchanged)
    assert "UPDATE pools_node" not in statements(unchanged)

    core = cluster.core()
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "training"}}})
    core.delete_node("gpu-new-001")
    # A row the state never held (left by an earlier process) whose node is not listed.
    Node.objects.create(name="from-before", last_seen=timezone.now())
    with CaptureQueriesContext(connection) as changed:
        nodes_relist(state)
        flush(state.take(), timezone.now())
    upsert = next(q["sql"] for q in changed.captured_queries if "INSERT INTO" in q["sql"])
    assert upsert.startswith("1 times: ")  # the relabelled node's row alone
    assert Node.objects.get(name="gpu-new-000").pool_label == "training"
    gone = Node.objects.filter(gone_at__isnull=False).values_list("name", flat=True)
    assert sorted(gone) == ["from-before", "gpu-new-001"]
