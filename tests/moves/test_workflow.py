"""The workflow's rules and transitions, over rows (tests.factories): no cluster and no
worker needed, nothing gets approved to run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from pools import moves
from pools.common.errors import InvalidMove, MoveRefused, NotAllowed, Refused
from pools.common.events import execution_wanted, move_event
from pools.core.checks import NodeFacts, PoolFacts, move_checks
from pools.fleet import selectors
from pools.models import AuditEvent, MoveItem, MoveRequest, Node, Pool
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

State = MoveRequest.State


@pytest.fixture
def inventory(db) -> dict[str, Node]:  # type: ignore[no-untyped-def]
    """The demo scenario's GPU nodes, as the inventory stores them."""
    return demo_inventory()


def ask(names: list[str], destination: str, user=None, **options):  # type: ignore[no-untyped-def]
    return moves.move_request_create(
        requested_by=user or user_in("requesters", "rita"),
        node_names=names,
        destination=Pool.objects.get(name=destination),
        reason=options.pop("reason", "why not"),
        now=options.pop("now", timezone.now()),
        **options,
    )


# --- the pure checks ---


def test_checks_report_every_problem_by_node() -> None:
    destination = PoolFacts(
        "inference", accepted_models=("NVIDIA-H100-80GB-HBM3",), requires_healthy=True
    )
    nodes = [
        NodeFacts(
            "n1",
            present=True,
            pool="inference",
            gpu_model="NVIDIA-H100-80GB-HBM3",
            has_metrics=True,
            xid_gpus=0,
        ),
        NodeFacts(
            "n2",
            present=True,
            pool="training",
            gpu_model="NVIDIA-A100-SXM4-80GB",
            has_metrics=True,
            xid_gpus=0,
        ),
        NodeFacts(
            "n3",
            present=True,
            pool="mixed",
            gpu_model="NVIDIA-H100-80GB-HBM3",
            has_metrics=True,
            xid_gpus=2,
        ),
        NodeFacts(
            "n4", present=True, pool="mixed", gpu_model="NVIDIA-H100-80GB-HBM3", has_metrics=False
        ),
        NodeFacts("n5", present=False, pool=None),
        NodeFacts(
            "n6",
            present=True,
            pool="mixed",
            gpu_model="NVIDIA-H100-80GB-HBM3",
            active_move=7,
            has_metrics=True,
            xid_gpus=0,
        ),
    ]
    failures = move_checks(nodes, destination, {})
    assert [(f.node, f.code) for f in failures] == [
        ("n1", "same_pool"),
        ("n2", "gpu_model"),
        ("n3", "xid_errors"),
        ("n4", "no_metrics"),
        ("n5", "node_not_found"),
        ("n6", "active_move"),
    ]
    overridden = move_checks(nodes[2:4], destination, {}, health_override="burn-in test")
    assert overridden == []


def test_capacity_floor_counts_other_active_moves() -> None:
    nodes = [NodeFacts("t1", present=True, pool="training")]
    sources = {"training": PoolFacts("training", min_nodes=2, present_nodes=4, leaving=1)}
    assert move_checks(nodes, PoolFacts("mixed"), sources) == []
    two = [*nodes, NodeFacts("t2", present=True, pool="training")]
    (failure,) = move_checks(two, PoolFacts("mixed"), sources)
    assert failure.code == "capacity_floor"
    assert failure.message == (
        "Pool training would keep 1 node, below its minimum of 2 "
        "(4 now, 1 already leaving in other moves, 2 in this request)."
    )


# --- requests ---


@pytest.mark.django_db
def test_a_request_records_source_diff_and_pods(inventory: dict[str, Node]) -> None:
    move = ask(["a100-infer-000"], "mixed", drain_policy="drain-first")
    item = move.items.get()
    assert (item.source_pool.name, item.source_label, item.state) == (
        "inference",
        "inference",
        "pending",
    )
    assert item.planned_diff["taints_removed"] == ["workload-inference=true:NoSchedule"]
    assert [p["name"] for p in item.gpu_pods] == [
        "chat-serving-a100-infer-000-0",
        "chat-serving-a100-infer-000-1",
        "embedder-a100-infer-000",
    ]
    assert move.approvals_required == 1 and move.drain_policy == "drain-first"
    assert AuditEvent.objects.get(request=move).action == "move.requested"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"reason": "  "}, "reason"),
        ({"drain_policy": "yolo"}, "drain_policy"),
        ({"loan_until": timezone.now() - timedelta(minutes=1)}, "loan_until"),
    ],
)
def test_invalid_requests_name_the_field_and_create_nothing(
    inventory: dict[str, Node],
    options,  # type: ignore[no-untyped-def]
    field: str,
) -> None:
    with pytest.raises(InvalidMove) as caught:
        ask(["gpu-new-000"], "mixed", **options)
    assert field in caught.value.fields and caught.value.status == 400
    assert not MoveRequest.objects.exists()


@pytest.mark.django_db
def test_capacity_floor_refusal(inventory: dict[str, Node]) -> None:
    ask(["a100-train-000", "a100-train-001"], "mixed")  # training: 5 nodes, minimum 2
    with pytest.raises(MoveRefused) as caught:
        ask(["a100-train-002", "a100-train-003"], "mixed")
    assert caught.value.code == "capacity_floor"
    assert (
        "Pool training would keep 1 node, below its minimum of 2 (5 now, 2 already "
        "leaving in other moves, 2 in this request)." in caught.value.message
    )
    assert MoveRequest.objects.count() == 1


@pytest.mark.django_db
def test_one_active_move_per_node_is_a_database_constraint(inventory: dict[str, Node]) -> None:
    move = ask(["gpu-new-000"], "mixed")
    with pytest.raises(MoveRefused) as caught:
        ask(["gpu-new-000"], "inference")
    assert caught.value.code == "active_move"
    node = Node.objects.get(name="gpu-new-000")
    with pytest.raises(IntegrityError), transaction.atomic():
        MoveItem.objects.create(request=move, node=node, planned_diff={})
    moves.move_cancel(request=move, user=move.requested_by, now=timezone.now())
    assert ask(["gpu-new-000"], "inference").state == State.PENDING  # free again


@pytest.mark.django_db
def test_gpu_model_and_health_rules(inventory: dict[str, Node]) -> None:
    Pool.objects.filter(name="inference").update(
        accepted_gpu_models=["NVIDIA-H100-80GB-HBM3"], requires_healthy_nodes=True
    )
    with pytest.raises(MoveRefused) as caught:
        ask(["a100-reserve-000"], "inference")
    codes = {f.code for f in caught.value.failures}
    # No Prometheus is configured here, so health is unknown as well.
    assert codes == {"gpu_model", "health_unknown"}
    Pool.objects.filter(name="inference").update(accepted_gpu_models=[])
    move = ask(["a100-reserve-000"], "inference", health_override="burn-in done by hand")
    assert move.health_override == "burn-in done by hand"
    assert "health override: burn-in done by hand" in AuditEvent.objects.get(request=move).message


@pytest.mark.django_db
def test_a_pool_refuses_nodes_in_a_layout_it_does_not_accept(inventory: dict[str, Node]) -> None:
    mig = inventory["a100-reserve-000"]
    # The node as the inventory records a node split into 56 1g.10gb instances.
    mig.devices = {
        "model": "NVIDIA-A100-SXM4-80GB",
        "memory_mib": 81920,
        "gpus": 8,
        "mig_gpus": 8,
        "units": [["mig", "nvidia.com/gpu", "1g.10gb", "", 1, 56]],
        "operator": {"nvidia.com/mig.config": "all-1g.10gb"},
    }
    mig.save()
    Pool.objects.filter(name="inference").update(accepted_gpu_layouts=["whole", "mig-3g.40gb"])
    with pytest.raises(MoveRefused) as caught:
        ask(["a100-reserve-000"], "inference")
    [failure] = caught.value.failures
    assert failure.code == "gpu_layout" and failure.node == "a100-reserve-000"
    assert "offers its GPUs as mig-1g.10gb; pool inference accepts only whole, mig-3g.40gb" in (
        failure.message
    )
    assert not MoveRequest.objects.exists()
    Pool.objects.filter(name="inference").update(accepted_gpu_layouts=["mig-1g.10gb"])
    assert ask(["a100-reserve-000"], "inference").state == State.PENDING


@pytest.mark.django_db
def test_reconcile_needs_a_drifted_node_in_its_own_pool(inventory: dict[str, Node]) -> None:
    move = ask(["a100-train-drift-000"], "training", reconcile=True)
    assert move.kind == "reconcile"
    assert move.items.get().planned_diff["taints_added"] == ["workload-training=true:NoSchedule"]
    with pytest.raises(MoveRefused) as caught:
        ask(["a100-train-000"], "training", reconcile=True)
    assert caught.value.code == "not_drifted"
    with pytest.raises(MoveRefused) as caught:
        ask(["a100-infer-000"], "training", reconcile=True)
    assert caught.value.code == "not_in_pool"
    assert selectors.drifted_node_names(Pool.objects.get(name="training")) == []  # held


@pytest.mark.django_db
def test_viewers_cannot_ask_and_requesters_cannot_approve(inventory: dict[str, Node]) -> None:
    with pytest.raises(NotAllowed):
        ask(["gpu-new-000"], "mixed", user=user_in("viewers"))
    move = ask(["gpu-new-000"], "mixed")
    with pytest.raises(NotAllowed) as caught:
        moves.move_approve(
            request=move, approver=user_in("requesters", "other"), now=timezone.now()
        )
    assert caught.value.code == "forbidden"


# --- transitions ---


@pytest.mark.django_db
def test_no_self_approval_even_for_a_pool_admin(inventory: dict[str, Node]) -> None:
    admin = user_in("pool-admins")
    move = ask(["gpu-new-000"], "mixed", user=admin)
    with pytest.raises(NotAllowed) as caught:
        moves.move_approve(request=move, approver=admin, now=timezone.now())
    assert caught.value.code == "self_approval"
    move.refresh_from_db()
    assert move.state == State.PENDING and not move.approvals.exists()


@pytest.mark.django_db
def test_a_pool_can_require_two_approvals(
    inventory: dict[str, Node], django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    Pool.objects.filter(name="training").update(approvals_required=2)
    move = ask(["gpu-new-000"], "training")
    first = user_in("approvers", "a1")
    with django_capture_on_commit_callbacks() as queued:
        move = moves.move_approve(request=move, approver=first, now=timezone.now())
    assert move.state == State.PENDING and not queued
    with pytest.raises(Refused) as caught:
        moves.move_approve(request=move, approver=first, now=timezone.now())
    assert caught.value.code == "already_approved"
    with django_capture_on_commit_callbacks() as queued:
        move = moves.move_approve(
            request=move, approver=user_in("approvers", "a2"), now=timezone.now()
        )
    # The execution, and the "approved" notification event.
    announced = [getattr(callback, "signal", None) for callback in queued]
    assert move.state == State.APPROVED
    assert announced == [execution_wanted, move_event]


@pytest.mark.django_db
def test_illegal_steps_are_refused_with_the_state(inventory: dict[str, Node]) -> None:
    move = ask(["gpu-new-000"], "mixed")
    approver = user_in("approvers")
    moves.move_reject(request=move, approver=approver, reason="not now", now=timezone.now())
    for step in (
        lambda: moves.move_approve(request=move, approver=approver, now=timezone.now()),
        lambda: moves.move_cancel(request=move, user=move.requested_by, now=timezone.now()),
        lambda: moves.move_reject(
            request=move, approver=approver, reason="again", now=timezone.now()
        ),
    ):
        with pytest.raises(Refused) as caught:
            step()
        assert caught.value.code == "state_conflict"
        assert caught.value.message.endswith("it is rejected.")
    assert not MoveItem.objects.filter(active=True).exists()


@pytest.mark.django_db
def test_only_the_requester_or_a_pool_admin_cancels(inventory: dict[str, Node]) -> None:
    move = ask(["gpu-new-000"], "mixed")
    with pytest.raises(NotAllowed):
        moves.move_cancel(
            request=move, user=user_in("requesters", "someone-else"), now=timezone.now()
        )
    cancelled = moves.move_cancel(request=move, user=user_in("pool-admins"), now=timezone.now())
    assert cancelled.state == State.CANCELLED


@pytest.mark.django_db
def test_pending_requests_expire(inventory: dict[str, Node]) -> None:
    now = timezone.now()
    move = ask(["gpu-new-000"], "mixed", now=now)
    assert moves.moves_expire(now=now + timedelta(hours=71)) == 0
    assert moves.moves_expire(now=now + timedelta(hours=73)) == 1
    move.refresh_from_db()
    assert move.state == State.EXPIRED
    assert AuditEvent.objects.filter(request=move, action="move.expired").exists()


@pytest.mark.django_db
def test_audit_events_are_append_only(inventory: dict[str, Node]) -> None:
    event = AuditEvent.objects.create(action="x", actor_name="system")
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        event.delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.all().delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.update(action="y")


@pytest.mark.django_db
def test_loans_end_early_or_extend_only_through_another_person(inventory: dict[str, Node]) -> None:
    now = timezone.now()
    requester = user_in("requesters", "rita")
    loan = ask(["a100-reserve-000"], "shared", user=requester, loan_until=now + timedelta(hours=4))
    with pytest.raises(NotAllowed):
        moves.loan_change(loan=loan, approver=requester, until=None, reason="x", now=now)
    approver = user_in("approvers")
    extended = moves.loan_change(
        loan=loan,
        approver=approver,
        until=now + timedelta(hours=8),
        reason="launch slipped",
        now=now,
    )
    assert extended.loan_until == now + timedelta(hours=8)
    ended = moves.loan_change(loan=loan, approver=approver, until=None, reason="done", now=now)
    assert ended.loan_until == now
    assert [e.action for e in AuditEvent.objects.filter(request=loan).order_by("id")][-2:] == [
        "loan.extended",
        "loan.ended_early",
    ]


@pytest.mark.django_db
def test_a_loan_return_skips_a_node_another_move_holds(inventory: dict[str, Node]) -> None:
    now = timezone.now()
    names = ["a100-reserve-000", "a100-reserve-001"]
    loan = ask(names, "shared", loan_until=now + timedelta(hours=1))
    # As if executed: both nodes in shared, the loan succeeded and released them.
    Node.objects.filter(name__in=names).update(
        pool=Pool.objects.get(name="shared"), pool_label="shared"
    )
    MoveItem.objects.filter(request=loan).update(state=MoveItem.State.DONE, active=False)
    MoveRequest.objects.filter(pk=loan.pk).update(state=State.SUCCEEDED)
    other = ask(["a100-reserve-001"], "inference", user=user_in("requesters", "someone"))
    (back,) = moves.loans_return_due(now=now + timedelta(hours=2))
    assert [i.node.name for i in back.items.all()] == ["a100-reserve-000"]
    assert back.destination.name == "mixed"
    blocked = AuditEvent.objects.get(request=loan, action="loan.return_blocked")
    assert blocked.node_name == "a100-reserve-001" and f"move #{other.pk}" in blocked.message


@pytest.mark.django_db
def test_an_unassigned_node_cannot_be_lent(inventory: dict[str, Node]) -> None:
    with pytest.raises(MoveRefused) as caught:
        ask(["gpu-new-000"], "mixed", loan_until=timezone.now() + timedelta(hours=1))
    assert caught.value.code == "loan_without_pool"
    assert not MoveRequest.objects.exists()
