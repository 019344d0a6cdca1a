"""A move whose PATCH went through while the API server's answer was lost (issue 25, R4)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from pools import moves
from pools.inventory import inventory_sync
from pools.kube import patcher
from pools.models import AuditEvent, MoveRequest, Pool
from pools.moves.execution import run
from tests.edges.kube.test_patcher import applied_then_timed_out
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = pytest.mark.both_backends


@pytest.mark.django_db
def test_a_node_patched_before_the_api_hung_is_recorded_done_with_the_planned_diff(
    cluster: Kubesim,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inventory_sync()
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["gpu-new-000"],
        destination=Pool.objects.get(name="mixed"),
        reason="rebalance",
        now=timezone.now(),
    )
    move = moves.move_approve(
        request=move, approver=user_in("approvers", "arno"), now=timezone.now()
    )
    monkeypatch.setattr(patcher, "_send_patch", applied_then_timed_out(patcher._send_patch))

    assert run.execute_items(run.start_request(move.pk)) == []

    move.refresh_from_db()
    item = move.items.get()
    assert (move.state, item.state) == (MoveRequest.State.SUCCEEDED, "done")
    assert item.applied_diff == item.planned_diff
    assert item.applied_diff["labels_added"]["gpu-pool"] == "mixed"
    assert "gpu-pool" not in item.before["labels"]
    assert item.after["labels"]["gpu-pool"] == "mixed"
    event = AuditEvent.objects.get(request=move, node_name="gpu-new-000")
    assert event.action == "node.patched" and "answer was lost" in event.message
