"""Drills against kubesim: a pool admin takes a node down for a defined time; the node is
cordoned on the cluster and flagged by the portal, then restored, and the checks recorded;
every step audited. Only pool admins; one drill a pool; the beat ends a drill whose worker
died."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from pools import drills
from pools.common.errors import InvalidInput, NotAllowed, Refused
from pools.inventory import inventory_sync
from pools.models import AuditEvent, Drill, GpuPod, Node, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in
from tests.servers import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]
NODE = "a100-train-001"


def unschedulable(cluster: Kubesim, name: str) -> bool:
    return bool(cluster.core().read_node(name).spec.unschedulable)


def start(hold: int = 10, node: str = NODE, role: str = "pool-admins") -> Drill:
    return drills.drill_start(
        pool=Pool.objects.get(name="training"),
        node_name=node,
        hold_seconds=hold,
        user=user_in(role, f"drill-{role}"),
        now=timezone.now(),
    )


def test_a_node_down_drill_takes_the_node_down_and_restores_it(cluster: Kubesim) -> None:
    inventory_sync()
    drill = start()
    assert drill.state == Drill.State.STARTING and not unschedulable(cluster, NODE)
    running = drills.drill_begin(drill.pk)
    assert running is not None and running.state == Drill.State.RUNNING
    assert unschedulable(cluster, NODE) and Node.objects.get(name=NODE).cordoned
    assert drills.drill_begin(drill.pk) is None  # a redelivered message does nothing

    done = drills.drill_finish(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.PASSED, done.checks
    assert not unschedulable(cluster, NODE) and not Node.objects.get(name=NODE).cordoned
    assert {c["name"]: c["status"] for c in done.checks} == {
        "flagged": "pass",
        "pods_kept": "pass",
        "room": "pass",
        "restored": "pass",
    }
    assert done.observed["pods_before"] == done.observed["pods_during"] > 0
    assert drills.drill_finish(drill.pk, now=timezone.now()) is None
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["drill.started", "drill.node_down", "drill.finished"]


def test_jobs_left_pending_without_a_spare_node_fail_the_drill(cluster: Kubesim) -> None:
    inventory_sync()
    drill = start()
    drills.drill_begin(drill.pk)
    # While the node is down, a training job waits: the pool has no node with every GPU free.
    GpuPod.objects.create(
        uid="waiting",
        namespace="ml-training",
        name="waiting",
        gpus=8,
        units=8,
        created_at=timezone.now(),
        node_selector={"gpu-pool": "training"},
    )
    done = drills.drill_finish(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.FAILED
    room = next(c for c in done.checks if c["name"] == "room")
    assert room["status"] == "fail" and "stayed Pending" in room["detail"]
    assert not unschedulable(cluster, NODE)  # restored all the same


def test_the_beat_ends_a_drill_whose_worker_died(cluster: Kubesim) -> None:
    inventory_sync()
    drill = start()
    drills.drill_begin(drill.pk)
    assert drills.drills_end_overdue(now=timezone.now()) == []  # not yet at its end
    later = drill.ends_at + timedelta(seconds=1)
    assert drills.drills_end_overdue(now=later) == [drill.pk]
    assert not unschedulable(cluster, NODE)
    assert Drill.objects.get(pk=drill.pk).state == Drill.State.PASSED


def test_only_pool_admins_one_at_a_time_within_bounds(cluster: Kubesim) -> None:
    inventory_sync()
    with pytest.raises(NotAllowed):
        start(role="approvers")
    with pytest.raises(InvalidInput) as bad:
        start(hold=5)
    assert "hold_seconds" in bad.value.fields
    with pytest.raises(InvalidInput) as elsewhere:
        start(node="a100-infer-000")
    assert "not a node of pool training" in elsewhere.value.fields["node"]
    start()
    with pytest.raises(Refused) as busy:
        start(node="a100-train-002")
    assert busy.value.code == "drill_running"
    assert Drill.objects.count() == 1


def test_the_drills_page_starts_a_drill_for_pool_admins_only(cluster: Kubesim) -> None:
    inventory_sync()
    viewer, admin = Client(), Client()
    viewer.force_login(user_in("viewers", "page-viewer"))
    admin.force_login(user_in("pool-admins", "page-admin"))
    assert 'id="drill-form"' not in viewer.get("/pools/training/drills/").content.decode()
    viewer.post("/pools/training/drills/", {"node": NODE, "hold_seconds": "30"})
    assert not Drill.objects.exists()
    page = admin.get("/pools/training/drills/").content.decode()
    assert 'id="drill-form"' in page and f'<option value="{NODE}">' in page
    admin.post("/pools/training/drills/", {"node": NODE, "hold_seconds": "30"})
    drill = Drill.objects.get()
    assert (drill.node_name, drill.hold_seconds, drill.state) == (NODE, 30, "starting")
    assert f'data-drill="{drill.pk}"' in admin.get("/pools/training/drills/").content.decode()


@pytest.mark.kubesim_only(
    "a GPU-fault drill injects its XID through kubesim's API server; a real one refuses it "
    "(test_drill_api.py::test_a_gpu_fault_drill_is_refused_by_a_real_api_server)"
)
def test_the_drills_page_starts_each_kind(cluster: Kubesim, settings) -> None:  # type: ignore[no-untyped-def]
    settings.INVENTORY_SYNC_SECONDS = 10
    inventory_sync()
    admin = Client()
    admin.force_login(user_in("pool-admins", "kinds-admin"))
    page = admin.get("/pools/training/drills/").content.decode()
    for kind in ("node_down", "gpu_fault", "node_joins"):
        assert f'<option value="{kind}">' in page
    # The node list is for the drills on a node: a new node's drill adds its own.
    admin.post(
        "/pools/training/drills/", {"kind": "node_joins", "node": NODE, "hold_seconds": "10"}
    )
    joins = Drill.objects.get()
    assert (joins.kind, joins.node_name) == ("node_joins", f"drill-new-node-{joins.pk}")
    Drill.objects.filter(pk=joins.pk).update(state=Drill.State.PASSED)
    admin.post("/pools/training/drills/", {"kind": "gpu_fault", "node": NODE, "hold_seconds": "60"})
    fault = Drill.objects.exclude(pk=joins.pk).get()
    assert (fault.kind, fault.node_name) == ("gpu_fault", NODE)
    refused = admin.post(
        "/pools/inference/drills/",
        {"kind": "bogus", "node": NODE, "hold_seconds": "10"},
        follow=True,
    )
    assert "Unknown drill kind" in refused.content.decode()
    assert Drill.objects.count() == 2


def unreachable_kubeconfig(cluster: Kubesim, tmp_path: Path) -> str:
    path = tmp_path / "unreachable-kubeconfig"
    path.write_text(
        re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{free_port()}", cluster.kubeconfig.read_text())
    )
    return str(path)


def test_a_start_that_fails_and_cannot_be_undone_is_restored_by_the_beat(  # type: ignore[no-untyped-def]
    cluster: Kubesim, settings, tmp_path: Path
) -> None:
    inventory_sync()
    drill = start()
    settings.KUBECONFIG = unreachable_kubeconfig(cluster, tmp_path)
    stuck = drills.drill_begin(drill.pk, now=timezone.now())
    assert stuck is not None and stuck.state == Drill.State.RUNNING
    assert "could not start the drill" in stuck.error and "undoing it failed too" in stuck.error
    settings.KUBECONFIG = str(cluster.kubeconfig)
    assert drills.drills_end_overdue(now=drill.ends_at + timedelta(seconds=1)) == [drill.pk]
    done = Drill.objects.get(pk=drill.pk)
    assert done.state == Drill.State.ERRORED and done.finished_at is not None
    assert done.error.startswith("could not start the drill") and "restored" in done.error
    assert not unschedulable(cluster, NODE)
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["drill.started", "drill.restore_failed", "drill.errored"]


def test_the_beat_gives_up_restoring_an_hour_after_the_end(  # type: ignore[no-untyped-def]
    cluster: Kubesim, settings, tmp_path: Path
) -> None:
    inventory_sync()
    drill = start()
    drills.drill_begin(drill.pk, now=timezone.now())
    settings.KUBECONFIG = unreachable_kubeconfig(cluster, tmp_path)
    drills.drills_end_overdue(now=drill.ends_at + timedelta(seconds=1))
    assert Drill.objects.get(pk=drill.pk).state == Drill.State.RUNNING  # retried later
    drills.drills_end_overdue(now=drill.ends_at + timedelta(hours=1, seconds=1))
    done = Drill.objects.get(pk=drill.pk)
    assert done.state == Drill.State.ERRORED and "restore by hand" in done.error
    assert drills.drills_end_overdue(now=drill.ends_at + timedelta(hours=2)) == []
