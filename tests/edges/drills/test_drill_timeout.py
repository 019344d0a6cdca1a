"""The job-timeout drill against kubesim and the real control plane: a probe pod with a
15-second activeDeadlineSeconds takes one GPU of the pool, runs, and is failed by the
kubelet (kubesim's, playing it for both) with DeadlineExceeded; the inventory sync that
runs during the hold records it and the insights count it as a timeout. Then it is deleted."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone
from kubernetes.client.exceptions import ApiException

from pools import drills
from pools.common.errors import InvalidInput
from pools.core.drills import TIMEOUT_DEADLINE_SECONDS
from pools.inventory import inventory_sync
from pools.models import AuditEvent, Drill, GpuPod, Node, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


@pytest.fixture
def portal(cluster: Kubesim) -> Kubesim:  # type: ignore[no-untyped-def]
    inventory_sync()
    return cluster


def start(pool: str = "mixed", hold: int = 60) -> Drill:
    return drills.drill_start(
        pool=Pool.objects.get(name=pool),
        kind=Drill.Kind.JOB_TIMEOUT,
        node_name="",
        hold_seconds=hold,
        user=user_in("pool-admins", "timeout-admin"),
        now=timezone.now(),
    )


def phase_on_cluster(sim: Kubesim, name: str) -> tuple[str, str] | None:
    try:
        pod = sim.core().read_namespaced_pod(name, "default")
    except ApiException as exc:
        assert exc.status == 404
        return None
    return pod.status.phase, pod.status.reason or ""


def past_its_deadline(sim: Kubesim, name: str) -> tuple[str, str]:
    """The probe's phase and reason once it has ended (the deadline is the kubelet's)."""
    deadline = time.monotonic() + TIMEOUT_DEADLINE_SECONDS + 60
    while time.monotonic() < deadline:
        found = phase_on_cluster(sim, name)
        assert found is not None
        if found[0] in ("Failed", "Succeeded"):
            return found
        if hasattr(sim, "control"):
            sim.control("clock", {"advance": 5})  # kubesim's own clock: no need to wait
        time.sleep(0.5)
    raise AssertionError(f"{name} did not end within its deadline and a minute")


def test_a_job_past_its_deadline_is_reported_as_a_timeout_then_removed(portal: Kubesim) -> None:
    drill = start()
    name = drill.node_name
    assert name == f"drill-timeout-{drill.pk}"
    drills.drill_begin(drill.pk, now=timezone.now())
    assert past_its_deadline(portal, name) == ("Failed", "DeadlineExceeded")

    inventory_sync()  # the sync (or the watcher) that runs during the hold
    row = GpuPod.objects.get(namespace="default", name=name)
    assert (row.phase, row.termination_reason) == ("Failed", "DeadlineExceeded")

    done = drills.drill_finish(drill.pk, now=timezone.now())
    assert done is not None and done.state == Drill.State.PASSED, done.checks
    assert {c["name"]: c["status"] for c in done.checks} == {
        "cluster_ends_it": "pass",
        "reported_as_timeout": "pass",
        "removed": "pass",
    }
    assert phase_on_cluster(portal, name) is None
    actions = list(
        AuditEvent.objects.filter(message__contains=f"#{drill.pk}")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["drill.started", "drill.probe_created", "drill.finished"]


def test_a_pool_with_no_free_gpu_is_refused_before_anything_is_made(portal: Kubesim) -> None:
    Node.objects.filter(pool__name="inference").update(cordoned=True)
    with pytest.raises(InvalidInput) as refused:
        start(pool="inference")
    assert set(refused.value.fields) == {"pool"}
    assert "a job that never starts cannot time out" in refused.value.fields["pool"]
    assert not Drill.objects.exists()
