"""Moves end to end: a real Celery worker on a real Redis applies approved moves to kubesim."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from pools import moves, tasks
from pools.common.errors import Refused
from pools.inventory import inventory_sync
from pools.models import AuditEvent, MoveItem, MoveRequest, Node, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import FINAL, user_in, wait_for_state
from tests.servers import RedisServer, wait_for
from tests.workers import celery_worker

# Transactional: a worker process must see the rows. The data migrations' rows a flush
# removes come back through tests/conftest.py's migration_data fixture.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]
State = MoveRequest.State


@pytest.fixture
def portal(cluster: Kubesim, redis: RedisServer) -> Kubesim:
    inventory_sync()
    return cluster


def request_move(names: list[str], destination: str, **options: object) -> MoveRequest:
    return moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=names,
        destination=Pool.objects.get(name=destination),
        reason="rebalance for the launch",
        now=timezone.now(),
        **options,
    )  # type: ignore[arg-type]


def approve(request: MoveRequest, name: str = "arno") -> MoveRequest:
    return moves.move_approve(
        request=request, approver=user_in("approvers", name), now=timezone.now()
    )


def patches_by_node(sim: Kubesim) -> dict[str, list[int]]:
    result: dict[str, list[int]] = {}
    for event in sim.audit_events():
        if event["verb"] == "patch" and event.get("objectRef", {}).get("resource") == "nodes":
            result.setdefault(event["objectRef"]["name"], []).append(
                event["responseStatus"]["code"]
            )
    return result


def test_request_approve_execute_and_record(portal: Kubesim, tmp_path: Path) -> None:
    move = request_move(["a100-reserve-000", "a100-reserve-001"], "training")
    assert move.state == State.PENDING
    item = move.items.get(node__name="a100-reserve-000")
    assert item.source_label == "mixed"
    assert item.planned_diff["taints_added"] == ["workload-training=true:NoSchedule"]
    assert [p["name"] for p in item.gpu_pods] == ["notebook-a100-reserve-000"]
    with celery_worker(tmp_path):
        approve(move)
        move = wait_for_state(move, FINAL)
    assert move.state == State.SUCCEEDED
    core = portal.core()
    for name in ("a100-reserve-000", "a100-reserve-001"):
        node = core.read_node(name)
        assert node.metadata.labels["gpu-pool"] == "training"
        assert node.metadata.labels["workload-type"] == "training"
        assert node.metadata.labels["batch-scheduling"] == "enabled"
        assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [
            ("workload-training", "true", "NoSchedule")
        ]
        row = Node.objects.get(name=name)
        assert row.pool.name == "training" and not row.drifted  # refreshed at once
    assert patches_by_node(portal) == {"a100-reserve-000": [200], "a100-reserve-001": [200]}
    actions = list(
        AuditEvent.objects.filter(request=move).order_by("id").values_list("action", flat=True)
    )
    assert actions[:4] == [
        "move.requested",
        "move.approved",
        "move.fully_approved",
        "move.executing",
    ]
    assert actions.count("node.patched") == 2 and actions[-1] == "move.succeeded"
    patched = AuditEvent.objects.get(
        request=move, action="node.patched", node_name="a100-reserve-000"
    )
    assert patched.before["labels"]["gpu-pool"] == "mixed"
    assert patched.after["labels"]["gpu-pool"] == "training"
    assert not MoveItem.objects.filter(request=move, active=True).exists()
    assert set(move.items.values_list("attempts", flat=True)) == {1}  # one claim a node


def test_two_approvers_racing_give_one_execution(portal: Kubesim, tmp_path: Path) -> None:
    move = request_move(["gpu-new-000"], "inference")
    first, second = user_in("approvers", "a1"), user_in("approvers", "a2")
    outcomes: list[str] = []

    def race(approver) -> None:  # type: ignore[no-untyped-def]
        try:
            moves.move_approve(request=move, approver=approver, now=timezone.now())
            outcomes.append("approved")
        except Refused as exc:
            outcomes.append(exc.code)
        finally:
            connection.close()

    with celery_worker(tmp_path):
        threads = [threading.Thread(target=race, args=(a,)) for a in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["approved", "state_conflict"]
        wait_for_state(move, FINAL)
        # A second delivery of the same task does nothing: the request is finished.
        tasks.execute_move.delay(move.pk)
        time.sleep(1)
    assert AuditEvent.objects.filter(request=move, action="move.executing").count() == 1
    assert patches_by_node(portal) == {"gpu-new-000": [200]}


def test_a_stale_request_fails_without_patching(portal: Kubesim, tmp_path: Path) -> None:
    move = request_move(["a100-reserve-002"], "training")
    # Someone moves the node by hand before the approval.
    portal.core().patch_node("a100-reserve-002", {"metadata": {"labels": {"gpu-pool": "shared"}}})
    hand_patches = len(patches_by_node(portal)["a100-reserve-002"])
    with celery_worker(tmp_path):
        approve(move)
        move = wait_for_state(move, FINAL)
    assert move.state == State.FAILED
    item = move.items.get()
    assert item.state == MoveItem.State.FAILED
    assert item.error == "node changed since the request: it was in mixed and is now in shared"
    assert len(patches_by_node(portal)["a100-reserve-002"]) == hand_patches


@pytest.mark.kubesim_only("injects 503s and 409s into the API server")
def test_injected_503s_and_409s_end_in_success(portal: Kubesim, tmp_path: Path) -> None:
    move = request_move(["gpu-new-000", "gpu-new-001"], "mixed")
    portal.control(
        "faults",
        {
            "fail_next": [{"status": 503, "count": 3, "verb": "patch"}],
            "conflicts": {"gpu-new-001": 2},
        },
    )
    with celery_worker(tmp_path):
        approve(move)
        move = wait_for_state(move, FINAL)
    assert move.state == State.SUCCEEDED
    codes = patches_by_node(portal)
    assert sorted(codes["gpu-new-000"] + codes["gpu-new-001"]).count(200) == 2
    assert 503 in codes["gpu-new-000"] + codes["gpu-new-001"]
    assert codes["gpu-new-001"].count(409) == 2
    for name in ("gpu-new-000", "gpu-new-001"):
        assert portal.core().read_node(name).metadata.labels["gpu-pool"] == "mixed"


def evictions(sim: Kubesim) -> int:
    return sum(
        1
        for event in sim.audit_events()
        if event.get("objectRef", {}).get("subresource") == "eviction"
    )


def pod_lists(sim: Kubesim) -> int:
    return sim.count("list", resource="pods")


def terminating(sim: Kubesim, node: str) -> int:
    pods = sim.core().list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
    return sum(1 for p in pods.items if p.metadata.deletion_timestamp is not None)


def wait_out_terminating_pods(sim: Kubesim, node: str, count: int, polls: int = 3) -> None:
    """Evicted pods terminate for their grace period (30 s): once the drain has looked at
    them `polls` more times (0.2 s apart), the kubesim clock is run past it."""
    wait_for(lambda: terminating(sim, node) == count, timeout=30, what="pods terminating")
    seen = pod_lists(sim)
    wait_for(lambda: pod_lists(sim) >= seen + polls, timeout=30, what="more drain polls")
    sim.control("clock", {"advance": 30})


@pytest.mark.kubesim_only(
    "a pod owned by a DaemonSet that does not exist: the real garbage collector deletes it"
)
def test_drain_first_evicts_gpu_pods_then_relabels_and_uncordons(
    portal: Kubesim, tmp_path: Path
) -> None:
    # A DaemonSet's pod that holds a GPU (a validator, say): a drain leaves it, as it leaves
    # the device plugin and the exporter, for their controller would put them back at once.
    portal.core().create_namespaced_pod(
        "gpu-operator",
        {
            "metadata": {
                "name": "gpu-validator-a100-infer-004",
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": "gpu-validator",
                        "uid": "0b6a4f4e-9d0e-4c55-9a8e-3f1d2c7b5a10",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": "a100-infer-004",
                "containers": [{"name": "check", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
        },
    )
    move = request_move(
        ["a100-infer-004"], "mixed", drain_policy="drain-first", drain_deadline_seconds=30
    )
    with celery_worker(tmp_path):
        approve(move)
        wait_out_terminating_pods(portal, "a100-infer-004", 3)
        move = wait_for_state(move, FINAL)
    assert move.state == State.SUCCEEDED, move.items.get().error
    # A terminating pod is leaving: evicted once, never again on the later polls.
    assert evictions(portal) == 3
    core = portal.core()
    node = core.read_node("a100-infer-004")
    assert node.metadata.labels["gpu-pool"] == "mixed" and not node.spec.unschedulable
    left = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=a100-infer-004")
    assert sorted(p.metadata.name.rsplit("-", 1)[0] for p in left.items) == [
        "gpu-validator-a100-infer",
        "nvidia-dcgm-exporter",
        "nvidia-device-plugin-daemonset",
    ]
    assert all(p.metadata.owner_references[0].kind == "DaemonSet" for p in left.items)
    evicted = AuditEvent.objects.filter(request=move, action="pod.evicted")
    assert sorted(e.message for e in evicted) == [
        "ml-serving/chat-serving-a100-infer-004-0",
        "ml-serving/chat-serving-a100-infer-004-1",
        "ml-serving/embedder-a100-infer-004",
    ]
    actions = list(
        AuditEvent.objects.filter(request=move, node_name="a100-infer-004")
        .order_by("id")
        .values_list("action", flat=True)
    )
    # Recorded in the order they happened: the patch comes before the uncordon.
    assert (
        actions.index("node.cordoned")
        < actions.index("node.drained")
        < actions.index("node.patched")
        < actions.index("node.uncordoned")
    )
    assert actions.count("node.patched") == 1


def test_a_drain_waits_out_grace_periods_longer_than_its_deadline(
    portal: Kubesim, tmp_path: Path
) -> None:
    # One second to drain, pods that take thirty to stop: evicted in time, the drain waits
    # for them rather than failing a node that is emptying anyway.
    move = request_move(
        ["a100-infer-002"], "mixed", drain_policy="drain-first", drain_deadline_seconds=1
    )
    with celery_worker(tmp_path):
        approve(move)
        wait_out_terminating_pods(portal, "a100-infer-002", 3, polls=10)
        move = wait_for_state(move, FINAL)
    assert move.state == State.SUCCEEDED, move.items.get().error
    assert evictions(portal) == 3


def test_drain_first_blocked_by_a_budget_fails_at_its_deadline_and_uncordons(
    portal: Kubesim, tmp_path: Path
) -> None:
    from kubernetes import client

    client.PolicyV1Api(portal.api_client()).create_namespaced_pod_disruption_budget(
        "ml-serving",
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="chat"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available="100%",
                selector=client.V1LabelSelector(match_labels={"app": "chat-serving"}),
            ),
        ),
    )
    move = request_move(
        ["a100-infer-003"], "mixed", drain_policy="drain-first", drain_deadline_seconds=1
    )
    with celery_worker(tmp_path):
        approve(move)
        move = wait_for_state(move, FINAL)
    assert move.state == State.FAILED
    assert (
        "drain deadline of 1s passed with GPU pods still on the node: "
        "ml-serving/chat-serving-a100-infer-003-0" in move.items.get().error
    )
    node = portal.core().read_node("a100-infer-003")
    assert node.metadata.labels["gpu-pool"] == "inference" and not node.spec.unschedulable
    assert AuditEvent.objects.filter(request=move, action="pod.eviction_refused").exists()


def test_a_loan_returns_on_time(portal: Kubesim, tmp_path: Path) -> None:
    start = timezone.now()
    move = request_move(["a100-reserve-004"], "inference", loan_until=start + timedelta(hours=2))
    with celery_worker(tmp_path):
        approve(move)
        wait_for_state(move, FINAL)
        assert moves.loans_return_due(now=start + timedelta(hours=1)) == []
        (back,) = moves.loans_return_due(now=start + timedelta(hours=2, seconds=1))
        assert moves.loans_return_due(now=start + timedelta(hours=3)) == []  # only once
        back = wait_for_state(back, FINAL)
    assert (back.kind, back.state, back.parent_id) == ("loan_return", State.SUCCEEDED, move.pk)
    assert back.requested_by is None and back.destination.name == "mixed"
    node = portal.core().read_node("a100-reserve-004")
    assert node.metadata.labels["gpu-pool"] == "mixed" and not node.spec.taints
    assert patches_by_node(portal) == {"a100-reserve-004": [200, 200]}


@pytest.mark.kubesim_only("slows every API answer down by 150 ms to kill the worker mid-batch")
def test_a_worker_killed_mid_batch_resumes_with_one_patch_per_node(
    portal: Kubesim,
    tmp_path: Path,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.MOVE_SWEEP_GRACE_SECONDS = 1
    names = [f"a100-reserve-00{i}" for i in range(9)]
    move = request_move(names, "shared")
    portal.control("faults", {"latency_ms": 150})
    with celery_worker(
        tmp_path, concurrency=1, name="doomed", MOVE_LEASE_SECONDS="2", MOVE_PARALLEL_NODES="2"
    ) as doomed:
        approve(move)
        # The nodes of a chunk are recorded together at its end: killed after three PATCHes,
        # the worker leaves nodes changed and not recorded, the case a resume must confirm.
        wait_for(
            lambda: sum(1 for c in patches_by_node(portal).values() if 200 in c) >= 3,
            timeout=60,
            what="the doomed worker to patch three nodes",
        )
        doomed.kill()
    patched_before = {n for n, c in patches_by_node(portal).items() if 200 in c}
    assert len(patched_before) < len(names), "the batch finished before the kill"
    portal.control("faults", {"reset": True})
    time.sleep(2.5)  # the dead worker's leases run out
    with celery_worker(tmp_path, name="fresh", MOVE_LEASE_SECONDS="2"):
        # The node the dead worker held has an expired lease: the sweep enqueues it again.
        # The rest are still queued, or found by a later sweep; a duplicate is harmless.
        assert tasks.sweep_moves()["items"] >= 1

        def finished() -> bool:
            time.sleep(1)
            tasks.sweep_moves()
            move.refresh_from_db()
            return move.state in FINAL

        wait_for(finished, timeout=60, what="the fresh worker to finish the batch")
    assert move.state == State.SUCCEEDED
    patches = patches_by_node(portal)
    assert {name: codes.count(200) for name, codes in patches.items()} == dict.fromkeys(names, 1)
    # Every node is recorded as changed by this move, those the dead worker patched too.
    assert set(move.items.values_list("state", flat=True)) == {MoveItem.State.DONE}
    confirmed = move.items.filter(applied_diff__isnull=False, before__labels__isnull=False)
    assert all(i.before["labels"]["gpu-pool"] == "mixed" for i in confirmed)
    for name in names:
        assert portal.core().read_node(name).metadata.labels["gpu-pool"] == "shared"


def test_a_drain_longer_than_the_lease_keeps_its_node(portal: Kubesim, tmp_path: Path) -> None:
    from pools.moves.execution import run

    move = request_move(
        ["a100-infer-001"], "mixed", drain_policy="drain-first", drain_deadline_seconds=60
    )
    with celery_worker(tmp_path, MOVE_LEASE_SECONDS="2"):
        approve(move)
        wait_for(lambda: terminating(portal, "a100-infer-001") == 3, timeout=30, what="evictions")
        time.sleep(3)  # longer than the lease: the drain must have renewed it
        assert run.sweep(now=timezone.now())["items"] == []
        item = move.items.get()
        assert item.state == MoveItem.State.RUNNING and item.lease_until > timezone.now()
        portal.control("clock", {"advance": 30})
        move = wait_for_state(move, FINAL)
    assert move.state == State.SUCCEEDED, move.items.get().error
    assert move.items.get().attempts == 1  # never handed to another worker
    assert patches_by_node(portal)["a100-infer-001"].count(200) == 3  # cordon, move, uncordon
