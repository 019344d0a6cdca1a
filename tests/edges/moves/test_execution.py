"""Applying approved moves in-process against kubesim (tasks and workers: test_moves_e2e)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.core.desired import Target
from pools.fleet import services
from pools.inventory import inventory_sync
from pools.kube.patcher import apply_target
from pools.models import AuditEvent, MoveItem, MoveRequest, Node, Pool, PoolStay
from pools.moves.execution import run as execution
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

# The cluster is kubesim's API server, then the real control plane.
pytestmark = pytest.mark.both_backends

State = MoveRequest.State


@pytest.fixture
def portal(db, cluster: Kubesim) -> Kubesim:  # type: ignore[no-untyped-def]
    inventory_sync()
    return cluster


def approved(names: list[str], destination: str, **options: object) -> MoveRequest:
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=names,
        destination=Pool.objects.get(name=destination),
        reason="rebalance",
        now=timezone.now(),
        **options,  # type: ignore[arg-type]
    )
    return moves.move_approve(
        request=move, approver=user_in("approvers", "arno"), now=timezone.now()
    )


def run(move: MoveRequest) -> list[int]:
    """What a worker does: start the request, run its items; the ids left waiting."""
    return execution.execute_items(execution.start_request(move.pk))


def patches(sim: Kubesim, name: str) -> list[int]:
    return [
        e["responseStatus"]["code"]
        for e in sim.audit_events()
        if e["verb"] == "patch" and e.get("objectRef", {}).get("name") == name
    ]


def test_a_pool_edited_after_approval_does_not_reach_the_nodes(portal: Kubesim) -> None:
    move = approved(["a100-reserve-000", "a100-reserve-001"], "training")
    training = Pool.objects.get(name="training")
    training.labels = {**training.labels, "team": "vision"}
    training.taint_value = "exclusive"
    services.pool_save(pool=training)
    assert run(move) == []
    move.refresh_from_db()
    assert move.state == State.SUCCEEDED
    node = portal.core().read_node("a100-reserve-000")
    assert "team" not in node.metadata.labels
    assert node.metadata.labels["gpu-pool"] == "training"
    assert [(t.key, t.value) for t in node.spec.taints] == [("workload-training", "true")]
    # The pool has moved on: its new nodes show as drifted, for a new request to reconcile.
    row = Node.objects.get(name="a100-reserve-000")
    assert row.pool.name == "training" and row.drifted
    assert row.drift["labels_added"] == {"team": "vision"}


@pytest.mark.kubesim_only("the API server answers 503 to everything, then recovers")
def test_an_unavailable_api_keeps_the_node_waiting_until_the_deadline(
    portal: Kubesim,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    move = approved(["gpu-new-000"], "mixed")
    portal.control("faults", {"fail_next": [{"status": 503, "count": 1000}]})
    assert run(move) == [move.items.get().pk]
    item = move.items.get()
    assert (item.state, item.waiting) == ("pending", "waiting for the Kubernetes API (attempt 1)")
    assert AuditEvent.objects.filter(request=move, action="node.retrying").count() == 1
    page = Client()
    page.force_login(user_in("viewers"))
    html = page.get(f"/moves/{move.pk}/").content.decode()
    assert "waiting for the Kubernetes API (attempt 1)" in html
    # Again, within the deadline: still waiting, never failed.
    assert execution.execute_items([item.pk]) == [item.pk]
    assert move.items.get().waiting == "waiting for the Kubernetes API (attempt 2)"
    # The API is back: the node moves, once.
    portal.control("faults", {"reset": True})
    assert execution.execute_items([item.pk]) == []
    move.refresh_from_db()
    assert move.state == State.SUCCEEDED and move.items.get().waiting == ""
    assert patches(portal, "gpu-new-000").count(200) == 1


@pytest.mark.kubesim_only("the API server answers 503 to everything, then recovers")
def test_the_execution_deadline_fails_a_node_the_api_never_answered(portal: Kubesim) -> None:
    move = approved(["gpu-new-001"], "mixed")
    portal.control("faults", {"fail_next": [{"status": 503, "count": 1000}]})
    run(move)
    MoveRequest.objects.filter(pk=move.pk).update(started_at=timezone.now() - timedelta(minutes=16))
    assert execution.execute_items([move.items.get().pk]) == []
    move.refresh_from_db()
    item = move.items.get()
    assert move.state == State.FAILED and item.state == "failed"
    assert item.error.startswith(
        "the Kubernetes API stayed unavailable past the move's execution deadline (900 s): "
    )


def test_a_node_patched_by_a_worker_that_died_is_recorded_as_applied(portal: Kubesim) -> None:
    move = approved(["a100-reserve-002"], "training")
    item_id = execution.start_request(move.pk)[0]
    # A worker claimed it, sent its PATCH and died before recording: all it left is its
    # claim (expired by now) and the node changed.
    dead = execution._claim(item_id, timezone.now() - timedelta(hours=1))
    assert dead is not None

    assert apply_target("a100-reserve-002", Target.from_dict(dead.desired)).patched
    assert execution.execute_items([item_id]) == []
    item = MoveItem.objects.get(pk=item_id)
    assert item.state == "done" and item.attempts == 2
    assert item.before["labels"]["gpu-pool"] == "mixed"
    assert item.after["labels"]["gpu-pool"] == "training"
    event = AuditEvent.objects.get(request=move, action="node.patched")
    assert "confirmed on resume" in event.message
    assert event.before["labels"]["gpu-pool"] == "mixed"
    assert patches(portal, "a100-reserve-002").count(200) == 1


def test_a_node_already_cordoned_stays_cordoned_after_a_drain_first_move(
    portal: Kubesim,
) -> None:
    name = next(
        n.name
        for n in Node.objects.filter(pool__name="mixed").order_by("name")
        if not any(p["gpus"] for p in n.pods)
    )
    portal.core().patch_node(name, {"spec": {"unschedulable": True}})  # an operator's cordon
    move = approved([name], "training", drain_policy="drain-first", drain_deadline_seconds=30)
    assert run(move) == []
    move.refresh_from_db()
    assert move.state == State.SUCCEEDED, move.items.get().error
    node = portal.core().read_node(name)
    assert node.metadata.labels["gpu-pool"] == "training"
    assert node.spec.unschedulable is True
    actions = set(AuditEvent.objects.filter(request=move).values_list("action", flat=True))
    assert "node.already_cordoned" in actions and "node.uncordoned" not in actions


def test_a_chunk_reads_its_nodes_in_one_list_and_patches_each_once(portal: Kubesim) -> None:
    names = ["a100-reserve-000", "a100-reserve-001", "a100-reserve-002"]
    # One node's hostname label is not its name: the LIST misses it, and it is read alone.
    portal.core().patch_node(
        names[2], {"metadata": {"labels": {"kubernetes.io/hostname": "renamed-host"}}}
    )
    move = approved(names, "training")
    listed = portal.count("list", resource="nodes")  # the inventory's
    assert run(move) == []
    move.refresh_from_db()
    assert move.state == State.SUCCEEDED
    assert portal.count("list", resource="nodes") - listed == 1
    assert [portal.count("get", name=n) for n in names] == [0, 0, 1]
    assert [patches(portal, n) for n in names] == [[200], [200], [200, 200]]  # the setup's too
    for name in names:
        assert portal.core().read_node(name).metadata.labels["gpu-pool"] == "training"


def test_a_move_records_the_node_s_new_pool_from_the_moment_it_was_applied(portal: Kubesim) -> None:
    move = approved(["a100-reserve-000"], "training")
    started = timezone.now()
    assert run(move) == []
    stays = list(PoolStay.objects.filter(node_name="a100-reserve-000").order_by("since"))
    assert [(s.pool_label, s.until is None, s.earliest) for s in stays] == [
        ("mixed", False, True),
        ("training", True, False),
    ]
    # Recorded by the refresh right after the PATCH, not at the watcher's next sync.
    assert started <= stays[1].since <= timezone.now()
    assert stays[0].until == stays[1].since
