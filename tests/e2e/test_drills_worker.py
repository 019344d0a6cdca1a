"""A drill run by a real Celery worker, started over the API: the worker makes the change
after the commit, and the task it schedules for the end of the hold restores the cluster and
records the checks (kubesim, Redis, a worker process)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from pools.inventory import inventory_sync
from pools.models import AuditEvent, Drill
from tests.api.conftest import api
from tests.kubesim_process import Kubesim
from tests.servers import RedisServer, wait_for
from tests.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]
SYNC_SECONDS = 20


def exists(sim: Kubesim, name: str) -> bool:
    try:
        sim.core().read_node(name)
    except ApiException as exc:
        assert exc.status == 404
        return False
    return True


def test_a_new_node_drill_runs_on_the_worker_to_its_end(  # type: ignore[no-untyped-def]
    cluster: Kubesim, redis: RedisServer, settings, token_for, tmp_path: Path
) -> None:
    settings.INVENTORY_SYNC_SECONDS = SYNC_SECONDS
    inventory_sync()
    admin = api(token_for("pool-admins"))
    with celery_worker(tmp_path, INVENTORY_SYNC_SECONDS=str(SYNC_SECONDS)):
        answer = admin.post(
            "/api/v1/drills/",
            {"kind": "node_joins", "pool": "training", "hold_seconds": SYNC_SECONDS},
            "application/json",
        )
        assert answer.status_code == 201, answer.json()
        drill_id, name = answer.json()["id"], answer.json()["node"]
        wait_for(lambda: exists(cluster, name), timeout=30, what="the worker to add the node")
        inventory_sync()  # the periodic sync, during the hold
        wait_for(
            lambda: Drill.objects.get(pk=drill_id).state not in Drill.ACTIVE_STATES,
            timeout=SYNC_SECONDS + 60,
            what="the drill's end",
        )
    drill = Drill.objects.get(pk=drill_id)
    assert drill.state == Drill.State.PASSED, (drill.checks, drill.error)
    assert not exists(cluster, name)
    body = admin.get(f"/api/v1/drills/{drill_id}/").json()
    assert {c["name"]: c["status"] for c in body["checks"]} == {
        "recognised": "pass",
        "removed": "pass",
    }
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["drill.started", "drill.node_added", "drill.finished"]
