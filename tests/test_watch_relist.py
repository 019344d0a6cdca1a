"""A re-list of pods writes only what changed: a pod row already holding the pod's
resourceVersion is not written again, and a pod the list no longer shows is marked deleted."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.inventory.watch import WatchState, nodes_relist, pods_relist
from pools.models import GpuPod
from tests.kubesim_process import Kubesim


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
    assert pod_rows_written(changed) == 1
    after = stamps()
    assert [uid for uid in before if after[uid] != before[uid]] == [relabelled.uid]
    relabelled.refresh_from_db()
    vanished.refresh_from_db()
    assert (relabelled.team, relabelled.deleted_at) == ("vision", None)
    assert vanished.deleted_at is not None
    assert GpuPod.objects.filter(deleted_at__isnull=False).count() == 1
