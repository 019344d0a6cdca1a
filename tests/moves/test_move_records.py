"""Recording a chunk's outcomes: each node's end is a compare-and-swap on its claim, and the
whole chunk costs the same statements for 5 nodes as for 25."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools import moves
from pools.models import AuditEvent, MoveItem, MoveRequest, Pool
from pools.moves.execution import run
from pools.moves.execution.outcome import Outcome
from pools.moves.execution.writes import claim_items
from tests.factories import gpu_node
from tests.moves_helpers import user_in


def claimed_move(names: list[str]) -> tuple[MoveRequest, list[MoveItem]]:
    """An approved move of unassigned nodes into `mixed`, started and claimed by this worker."""
    for name in names:
        gpu_node(name, None)
    destination = Pool.objects.get(name="mixed")
    destination.requires_healthy_nodes = False
    destination.save()
    move = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=names,
        destination=destination,
        reason="records",
        now=timezone.now(),
    )
    moves.move_approve(request=move, approver=user_in("approvers", "arno"), now=timezone.now())
    now = timezone.now()
    return move, run._claim_many(run.start_request(move.pk, now=now), now)


def done(items: list[MoveItem]) -> dict[int, run.Result]:
    return {
        item.pk: Outcome("done", "gpu-pool: mixed", after={"labels": {"gpu-pool": "mixed"}})
        for item in items
    }


@pytest.mark.django_db
def test_a_node_claimed_since_by_another_worker_keeps_that_workers_record() -> None:
    names = [f"gpu-rec-{i}" for i in range(3)]
    move, items = claimed_move(names)
    # This worker took too long: the third node's lease ran out and another worker claimed it.
    later = timezone.now() + timedelta(seconds=settings.MOVE_LEASE_SECONDS + 1)
    third = items[2].pk
    assert claim_items([third], now=later, lease=later + timedelta(seconds=60)) == [third]

    assert run._record(items, done(items), now=later) == []

    rows = {i.node.name: i for i in MoveItem.objects.filter(request=move).select_related("node")}
    assert [rows[n].state for n in names] == ["done", "done", "running"]
    assert [rows[n].attempts for n in names] == [1, 1, 2]
    assert rows[names[2]].after == {}  # the other worker's to record
    patched = AuditEvent.objects.filter(request=move, action="node.patched")
    assert sorted(patched.values_list("node_name", flat=True)) == names[:2]
    assert patched.get(node_name=names[0]).after == {"labels": {"gpu-pool": "mixed"}}
    move.refresh_from_db()
    assert move.state == MoveRequest.State.EXECUTING  # the third node is still running


@pytest.mark.django_db
def test_recording_a_chunk_costs_the_same_statements_for_5_nodes_as_for_25() -> None:
    statements = []
    for size in (5, 25):
        move, items = claimed_move([f"gpu-rec-{size}-{i}" for i in range(size)])
        with CaptureQueriesContext(connection) as queries:
            run._record(items, done(items), now=timezone.now())
        statements.append(len(queries))
        move.refresh_from_db()
        assert move.state == MoveRequest.State.SUCCEEDED
        assert AuditEvent.objects.filter(request=move, action="node.patched").count() == size
    assert statements[0] == statements[1]
