"""The worker's steps of a maintenance against an API server: a wave held until a node label
says so, a drain past its deadline pausing the maintenance (then resumed, then cancelled,
its cordon lifted), an operator's own cordon left alone, a budget that allows nothing making
the maintenance wait without touching a node, and a worker's lease keeping a second worker
off. `now` is given to each step, so a deadline passes without waiting for it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pools.common.errors import Refused
from pools.common.events import maintenance_event
from pools.inventory import inventory_sync
from pools.maintenance import waves
from pools.maintenance.advance import LEASE_SECONDS, maintenance_advance
from pools.models import AuditEvent, GpuPod, Maintenance, MaintenanceNode, Pool
from tests.edges.maintenance.test_waves_cluster import _only_serve_pods_on, _serve_pod, _wait
from tests.edges.moves.test_drain_blocked import budget_keeping_every_chat_pod
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
NODES = ["a100-reserve-000", "a100-reserve-001"]


def _start(**options: object) -> Maintenance:
    values: dict[str, object] = {
        "pool": Pool.objects.get(name="mixed"),
        "user": user_in("pool-admins", "paula"),
        "reason": "firmware 2.1",
        "wave_size": 1,
        "nodes": NODES,
    }
    values.update(options)
    return waves.maintenance_start(**values)  # type: ignore[arg-type]


def _step(maintenance: Maintenance, after: float = 0) -> Maintenance:
    found = maintenance_advance(maintenance.pk, now=timezone.now() + timedelta(seconds=after))
    assert found is not None
    return found


def _cordoned(cluster: Kubesim, name: str) -> bool:
    return bool(cluster.core().read_node(name).spec.unschedulable)


def _label(cluster: Kubesim, name: str, key: str, value: str) -> None:
    cluster.core().patch_node(name, {"metadata": {"labels": {key: value}}})


def _actions(maintenance: Maintenance) -> list[str]:
    return list(
        AuditEvent.objects.filter(maintenance=maintenance)
        .order_by("id")
        .values_list("action", flat=True)
    )


@pytest.fixture
def empty_nodes(cluster: Kubesim) -> Kubesim:
    inventory_sync()
    _only_serve_pods_on(cluster, NODES)
    inventory_sync()
    return cluster


@pytest.mark.both_backends
def test_a_wave_is_held_until_its_label_says_the_step_is_done(empty_nodes: Kubesim) -> None:
    cluster = empty_nodes
    maintenance = _start(hold="label", hold_label="example.com/firmware=2.1")
    found = _step(maintenance)
    assert found.wave == 1 and _cordoned(cluster, NODES[0]) and not _cordoned(cluster, NODES[1])
    found = _step(found)
    assert found.waiting == (
        f"wave 1 drained: waiting for the label example.com/firmware=2.1 on {NODES[0]}"
    )
    with pytest.raises(Refused, match="waits for the label"):
        waves.maintenance_confirm(found.pk, wave=1, user=user_in("pool-admins", "paula"))
    _label(cluster, NODES[0], "example.com/firmware", "2.0")
    assert _step(found).wave == 1 and _cordoned(cluster, NODES[0])  # not the value asked

    _label(cluster, NODES[0], "example.com/firmware", "2.1")
    found = _step(found)
    assert found.wave == 2 and not _cordoned(cluster, NODES[0]) and _cordoned(cluster, NODES[1])
    _label(cluster, NODES[1], "example.com/firmware", "2.1")
    found = _step(found)
    assert found.state == Maintenance.State.DONE
    assert not _cordoned(cluster, NODES[1])
    assert _actions(found)[-3:] == ["node.uncordoned", "maintenance.wave_done", "maintenance.done"]


def test_a_bare_label_key_waits_for_its_value_to_change(empty_nodes: Kubesim) -> None:
    cluster = empty_nodes
    _label(cluster, NODES[0], "example.com/driver", "550")
    maintenance = _start(hold="label", hold_label="example.com/driver", nodes=NODES[:1])
    found = _step(_step(maintenance))
    assert MaintenanceNode.objects.get(maintenance=found).label_before == "550"
    assert found.state == Maintenance.State.RUNNING and _cordoned(cluster, NODES[0])
    _label(cluster, NODES[0], "example.com/driver", "570")
    assert _step(found).state == Maintenance.State.DONE
    assert not _cordoned(cluster, NODES[0])


def test_a_drain_past_its_deadline_pauses_then_resumes_and_a_cancel_lifts_the_cordon(
    empty_nodes: Kubesim,
) -> None:
    cluster = empty_nodes
    slow = _serve_pod("slow-to-leave", NODES[0])
    slow["spec"]["terminationGracePeriodSeconds"] = 3600
    cluster.core().create_namespaced_pod("ml-serving", slow)
    _wait(
        lambda: (
            cluster.core().read_namespaced_pod("slow-to-leave", "ml-serving").status.phase
            == "Running"
        ),
        "the slow pod",
    )
    inventory_sync()
    admin = user_in("pool-admins", "paula")
    maintenance = _start(step="driver upgraded", nodes=NODES[:1], drain_deadline_seconds=60)
    found = _step(maintenance)
    assert found.waiting == "wave 1 draining: 1 GPU pods left"
    found = _step(found, after=61)
    assert found.state == Maintenance.State.PAUSED
    assert "passed its deadline of 60 s with GPU pods still on: ml-serving/slow-to-leave" in (
        found.paused_reason
    )
    assert maintenance_advance(found.pk, now=timezone.now() + timedelta(seconds=120)) is None
    assert _actions(found).count("pod.evicted") == 1  # asked once: it is leaving

    found = waves.maintenance_resume(found.pk, user=admin, now=timezone.now())
    assert _step(found).state == Maintenance.State.RUNNING  # a whole deadline again
    waves.maintenance_cancel(found.pk, user=admin)
    found = _step(found)
    assert found.state == Maintenance.State.CANCELLED and found.finished_at is not None
    assert not _cordoned(cluster, NODES[0])
    assert set(
        MaintenanceNode.objects.filter(maintenance=found).values_list("state", flat=True)
    ) == {"left"}
    assert _actions(found)[-4:] == [
        "maintenance.resumed",
        "maintenance.cancel_requested",
        "node.uncordoned",
        "maintenance.cancelled",
    ]


def test_an_operators_cordon_is_theirs(empty_nodes: Kubesim) -> None:
    cluster = empty_nodes
    cluster.core().patch_node(NODES[0], {"spec": {"unschedulable": True}})
    inventory_sync()
    admin = user_in("pool-admins", "paula")
    maintenance = _start(step="driver upgraded", nodes=NODES[:1])
    found = _step(maintenance)
    row = MaintenanceNode.objects.get(maintenance=found)
    assert (row.state, row.operator_cordon, row.cordoned_by_portal) == ("held", True, False)
    # What it waits for is said from the moment the wave is drained (the notification too).
    assert found.waiting == "wave 1 drained: waiting for 'driver upgraded' to be confirmed"
    waves.maintenance_confirm(found.pk, wave=1, user=admin)
    assert _step(found).state == Maintenance.State.DONE
    assert _cordoned(cluster, NODES[0])  # still theirs
    assert _actions(found).count("node.already_cordoned") == 1
    assert "node.uncordoned" not in _actions(found)


def test_a_budget_that_allows_nothing_makes_it_wait_touching_nothing(cluster: Kubesim) -> None:
    budget_keeping_every_chat_pod(cluster)
    inventory_sync()
    chat_node = sorted(
        p.node_name for p in GpuPod.objects.live() if p.labels.get("app") == "chat-serving"
    )[0]
    maintenance = _start(pool=Pool.objects.get(name="inference"), nodes=[chat_node], step="x")
    found = _step(maintenance)
    assert found.wave == 0 and found.state == Maintenance.State.RUNNING
    assert found.waiting.startswith(
        "no node left can be drained now: PodDisruptionBudget ml-serving/chat allows 0"
    )
    assert not _cordoned(cluster, chat_node)
    assert not any(
        e.get("objectRef", {}).get("subresource") == "eviction" for e in cluster.audit_events()
    )


def test_a_workers_lease_keeps_another_off_until_it_runs_out(empty_nodes: Kubesim) -> None:
    maintenance = _start(step="driver upgraded", nodes=NODES[:1])
    now = timezone.now()
    Maintenance.objects.filter(pk=maintenance.pk).update(
        lease_until=now + timedelta(seconds=LEASE_SECONDS)
    )
    assert maintenance_advance(maintenance.pk, now=now) is None
    assert Maintenance.objects.get(pk=maintenance.pk).wave == 0
    found = maintenance_advance(maintenance.pk, now=now + timedelta(seconds=LEASE_SECONDS + 1))
    assert found is not None and found.wave == 1 and found.lease_until is None


def test_a_worker_that_died_between_the_record_and_the_cordon_cordons_on_the_next_step(
    empty_nodes: Kubesim,
) -> None:
    cluster = empty_nodes
    maintenance = _start(step="driver upgraded", nodes=NODES[:1])
    found = _step(maintenance)
    # As if the worker had died after recording the cordon as the maintenance's, before
    # sending it: the node is schedulable, the row says the cordon is ours.
    cluster.core().patch_node(NODES[0], {"spec": {"unschedulable": None}})
    MaintenanceNode.objects.filter(maintenance=found).update(state="draining")
    found = _step(found)
    assert _cordoned(cluster, NODES[0])
    waves.maintenance_confirm(found.pk, wave=1, user=user_in("pool-admins", "paula"))
    assert _step(found).state == Maintenance.State.DONE
    assert not _cordoned(cluster, NODES[0])


@pytest.mark.kubesim_only("the API server answers 503 to everything, then recovers")
def test_an_unavailable_api_leaves_it_where_it_stood_and_the_next_step_goes_on(
    empty_nodes: Kubesim,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    cluster = empty_nodes
    settings.PATCH_MAX_RETRIES = 0
    maintenance = _start(step="driver upgraded", nodes=NODES[:1])
    cluster.control("faults", {"fail_next": [{"status": 503, "count": 1000}]})
    found = _step(maintenance)
    assert (found.state, found.wave, found.lease_until) == ("running", 0, None)
    assert found.waiting.startswith(
        "not draining blind: the disruption budgets could not be read: listing "
        "PodDisruptionBudgets: API server answered 503"
    )
    assert not _actions(found).count("node.cordoned")
    cluster.control("faults", {"reset": True})
    found = _step(found)
    assert found.wave == 1 and _cordoned(cluster, NODES[0])

    waves.maintenance_confirm(found.pk, wave=1, user=user_in("pool-admins", "paula"))
    cluster.control("faults", {"fail_next": [{"status": 503, "count": 1000}]})
    found = _step(found)
    assert found.state == Maintenance.State.RUNNING and found.lease_until is None
    assert found.waiting.startswith("the Kubernetes API: ")
    assert found.waiting.endswith("(tried again at the next tick)")
    cluster.control("faults", {"reset": True})
    assert _step(found).state == Maintenance.State.DONE
    assert not _cordoned(cluster, NODES[0])
    assert _actions(found).count("node.cordoned") == _actions(found).count("node.uncordoned") == 1


def test_the_operator_is_told_when_a_wave_waits_and_when_it_ends(
    empty_nodes: Kubesim,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    told: list[tuple[int, str]] = []

    def listen(sender: object, maintenance_id: int, event: str, **kwargs: object) -> None:
        told.append((maintenance_id, event))

    maintenance_event.connect(listen)
    try:
        maintenance = _start(step="driver upgraded", nodes=NODES[:1])
        with django_capture_on_commit_callbacks(execute=True):
            found = _step(maintenance)
        assert told == [(found.pk, "held")]
        waves.maintenance_confirm(found.pk, wave=1, user=user_in("pool-admins", "paula"))
        with django_capture_on_commit_callbacks(execute=True):
            _step(found)
        assert told == [(found.pk, "held"), (found.pk, "done")]
    finally:
        maintenance_event.disconnect(listen)
