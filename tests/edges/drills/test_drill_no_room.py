"""The lack-of-resources drill against kubesim and the real control plane: a probe pod asks
the pool for one GPU more than any of its nodes has free; the scheduler keeps it pending
with "Insufficient nvidia.com/gpu", the inventory sync that runs during the hold shows it so
on the pending list, and the fit check says no node has room. Then it is deleted, whatever
the checks found, and every step is audited."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone
from kubernetes.client.exceptions import ApiException

from pools import drills
from pools.common.errors import InvalidInput
from pools.inventory import inventory_sync
from pools.models import AuditEvent, Drill, GpuPod, Node, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


@pytest.fixture
def portal(cluster: Kubesim) -> Kubesim:  # type: ignore[no-untyped-def]
    inventory_sync()
    return cluster


def start(hold: int = 30, node: str = "", pool: str = "training") -> Drill:
    return drills.drill_start(
        pool=Pool.objects.get(name=pool),
        kind=Drill.Kind.NO_ROOM,
        node_name=node,
        hold_seconds=hold,
        user=user_in("pool-admins", "room-admin"),
        now=timezone.now(),
    )


def probe_on_cluster(sim: Kubesim, name: str) -> dict[str, object] | None:
    try:
        pod = sim.core().read_namespaced_pod(name, "default")
    except ApiException as exc:
        assert exc.status == 404
        return None
    refused = [c.message for c in pod.status.conditions or [] if c.type == "PodScheduled"]
    return {"node": pod.spec.node_name, "refused": refused, "spec": pod.spec}


def refused_by_the_scheduler(sim: Kubesim, name: str) -> str:
    """The probe's PodScheduled=False message, once the scheduler has tried it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = probe_on_cluster(sim, name)
        assert found is not None and found["node"] is None, found
        if found["refused"] and found["refused"][0]:
            return str(found["refused"][0])
        time.sleep(0.5)
    raise AssertionError(f"the scheduler did not refuse {name} within 60 s")


def test_a_pod_larger_than_any_free_block_is_pending_for_want_of_gpus_then_removed(
    portal: Kubesim,
) -> None:
    drill = start()
    name = drill.node_name
    assert name == f"drill-no-room-{drill.pk}" and probe_on_cluster(portal, name) is None
    training = Node.objects.present().filter(pool__name="training", ready=True)
    most_free = max(n.gpu_allocatable - n.gpu_allocated for n in training)
    drills.drill_begin(drill.pk, now=timezone.now())
    found = probe_on_cluster(portal, name)
    assert found is not None
    spec = found["spec"]
    assert spec.node_selector == {"gpu-pool": "training"}  # type: ignore[attr-defined]
    limits = spec.containers[0].resources.limits  # type: ignore[attr-defined]
    assert limits == {"nvidia.com/gpu": str(most_free + 1)}
    assert "Insufficient nvidia.com/gpu" in refused_by_the_scheduler(portal, name)

    inventory_sync()  # the sync (or the watcher) that runs during the hold
    row = GpuPod.objects.get(namespace="default", name=name)
    assert "Insufficient nvidia.com/gpu" in row.unschedulable_message

    done = drills.drill_finish(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.PASSED, done.checks
    assert {c["name"]: c["status"] for c in done.checks} == {
        "scheduler_refuses": "pass",
        "portal_shows": "pass",
        "fit_says_no_room": "pass",
        "removed": "pass",
    }
    assert done.observed["gpus"] == most_free + 1
    assert probe_on_cluster(portal, name) is None
    actions = list(
        AuditEvent.objects.filter(message__contains=f"#{drill.pk}")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["drill.started", "drill.probe_created", "drill.finished"]


def test_a_portal_that_never_saw_the_probe_fails_that_check_and_still_removes_it(
    portal: Kubesim,
) -> None:
    drill = start()
    drills.drill_begin(drill.pk, now=timezone.now())
    refused_by_the_scheduler(portal, drill.node_name)
    # No sync and no watcher during the hold: the portal cannot have seen it.
    done = drills.drill_finish(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.FAILED
    checks = {c["name"]: c for c in done.checks}
    assert checks["scheduler_refuses"]["status"] == "pass"
    assert checks["portal_shows"]["status"] == "fail"
    assert "is the watcher running" in checks["portal_shows"]["detail"]
    assert checks["removed"]["status"] == "pass"
    assert probe_on_cluster(portal, drill.node_name) is None


def test_a_node_or_a_short_hold_is_refused_and_nothing_is_made(portal: Kubesim) -> None:
    with pytest.raises(InvalidInput) as refused:
        start(node="a100-train-000", hold=5)
    assert set(refused.value.fields) == {"node", "hold_seconds"}
    assert "give no node" in refused.value.fields["node"]
    assert not Drill.objects.exists()
