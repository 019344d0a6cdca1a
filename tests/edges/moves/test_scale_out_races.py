"""Two workers ending a request's last two nodes at the same moment: the request ends.

tests/e2e/test_scale_out.py found it on PostgreSQL (about one run in three): each worker, in its
own transaction, marked its node done and counted the request's nodes, saw the other's as
still running (not yet committed, READ COMMITTED), and left the request executing for
ever; no sweep looks at a request whose nodes are all finished. Here the two endings are
released together, several times over, on the session's database and again on PostgreSQL
where one is reachable (as tests/edges/moves/test_concurrency_postgres.py does for the workflow).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from pools import moves
from pools.models import AuditEvent, MoveItem, MoveRequest, Pool
from pools.moves.execution import run
from tests.edges.moves.test_concurrency_postgres import ROUNDS, gpu_node, queued_executions, race
from tests.moves_helpers import user_in
from tests.postgres_rerun import rerun_on_postgresql, rerunning_on_postgres
from tests.servers import RedisServer


@pytest.fixture
def destination() -> Pool:
    if rerunning_on_postgres():
        assert connection.vendor == "postgresql"  # the driver below asked for it
    pool = Pool.objects.get(name="mixed")
    pool.requires_healthy_nodes = False
    pool.save()
    return pool


@pytest.mark.django_db(transaction=True)
def test_two_nodes_ending_at_once_end_their_request(destination: Pool, redis: RedisServer) -> None:
    queued_executions(redis)  # start from an empty queue
    for round_ in range(ROUNDS):
        nodes = [gpu_node(f"gpu-end-{round_}-{i}").name for i in range(2)]
        move = moves.move_request_create(
            requested_by=user_in("requesters", "rita"),
            node_names=nodes,
            destination=destination,
            reason="race",
            now=timezone.now(),
        )
        moves.move_approve(request=move, approver=user_in("approvers", "a1"), now=timezone.now())
        claimed = [run._claim(i, timezone.now()) for i in run.start_request(move.pk)]
        assert len(claimed) == 2 and all(claimed)
        outcomes = race(
            *(
                lambda item=item: run._finish(item, MoveItem.State.DONE, message="done")
                for item in claimed
            )
        )
        assert outcomes == ["won", "won"]
        move.refresh_from_db()
        assert move.state == MoveRequest.State.SUCCEEDED, f"round {round_}: {move.state}"
        assert AuditEvent.objects.filter(request=move, action="move.succeeded").count() == 1
    queued_executions(redis)  # no worker of a later test may meet these approvals


def test_the_race_on_postgresql() -> None:
    rerun_on_postgresql(__file__, "test_the_race_on_postgresql", expected_passed=1)
