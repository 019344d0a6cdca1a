"""Two workers ending a request's last two nodes at the same moment: the request ends.

tests/test_scale_out.py found it on PostgreSQL (about one run in three): each worker, in its
own transaction, marked its node done and counted the request's nodes, saw the other's as
still running (not yet committed, READ COMMITTED), and left the request executing for
ever; no sweep looks at a request whose nodes are all finished. Here the two endings are
released together, several times over, on the session's database and again on PostgreSQL
where one is reachable (as tests/test_concurrency_postgres.py does for the workflow).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from django.db import connection
from django.utils import timezone

from pools import execution, workflow
from pools.models import AuditEvent, MoveItem, MoveRequest, Pool
from tests.moves_helpers import user_in
from tests.servers import RedisServer, free_port
from tests.test_concurrency_postgres import (
    ADMIN_URL,
    ROOT,
    ROUNDS,
    gpu_node,
    queued_executions,
    race,
)


@pytest.fixture
def destination() -> Pool:
    if os.environ.get("PORTAL_RACES_ON_POSTGRES") == "1":
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
        move = workflow.move_request_create(
            requested_by=user_in("requesters", "rita"),
            node_names=nodes,
            destination=destination,
            reason="race",
            now=timezone.now(),
        )
        workflow.move_approve(request=move, approver=user_in("approvers", "a1"), now=timezone.now())
        claimed = [execution._claim(i, timezone.now()) for i in execution.start_request(move.pk)]
        assert len(claimed) == 2 and all(claimed)
        outcomes = race(
            *(
                lambda item=item: execution._finish(item, MoveItem.State.DONE, message="done")
                for item in claimed
            )
        )
        assert outcomes == ["won", "won"]
        move.refresh_from_db()
        assert move.state == MoveRequest.State.SUCCEEDED, f"round {round_}: {move.state}"
        assert AuditEvent.objects.filter(request=move, action="move.succeeded").count() == 1
    queued_executions(redis)  # no worker of a later test may meet these approvals


def test_the_race_on_postgresql() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("this session runs on PostgreSQL already: the race above ran on it")
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(
            ADMIN_URL.replace("postgres://", "postgresql://"), connect_timeout=3
        ).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL reachable at {ADMIN_URL} (set PORTAL_TEST_POSTGRES_URL): {exc}")
    # Its own Redis, its own queue: the broker URL this session set would be inherited.
    inherited = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    env = {
        **inherited,
        "DATABASE_URL": f"{ADMIN_URL.rsplit('/', 1)[0]}/portal_ending_{uuid.uuid4().hex[:8]}",
        "PORTAL_TEST_REDIS_PORT": str(free_port()),
        "PORTAL_RACES_ON_POSTGRES": "1",
    }
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", __file__, "-q", "-rs", "-p", "no:cacheprovider"),
            *("-k", "not test_the_race_on_postgresql"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "1 passed" in output and "skipped" not in output, output
