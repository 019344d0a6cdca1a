"""A maintenance end to end: a real Celery worker on a real Redis takes it a step further
as soon as a person takes one (started, confirmed), with no beat running."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pools.inventory import inventory_sync
from pools.maintenance import waves
from pools.models import Maintenance, MaintenanceNode, Pool
from tests.edges.maintenance.test_waves_cluster import _only_serve_pods_on
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in
from tests.servers import RedisServer
from tests.workers import celery_worker

pytestmark = pytest.mark.django_db(transaction=True)
NODE = "a100-reserve-005"


def _until(check, what: str, seconds: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_the_worker_drains_a_wave_then_returns_it_once_confirmed(
    cluster: Kubesim, redis: RedisServer, tmp_path: Path
) -> None:
    inventory_sync()
    _only_serve_pods_on(cluster, [NODE])
    inventory_sync()
    admin = user_in("pool-admins", "paula")
    with celery_worker(tmp_path):
        maintenance = waves.maintenance_start(
            pool=Pool.objects.get(name="mixed"),
            user=admin,
            reason="driver 570",
            wave_size=1,
            step="driver upgraded",
            nodes=[NODE],
        )
        row = MaintenanceNode.objects.filter(maintenance=maintenance)
        _until(lambda: row.get().state == "held", "the wave to be drained")
        assert cluster.core().read_node(NODE).spec.unschedulable
        waves.maintenance_confirm(maintenance.pk, wave=1, user=admin)
        _until(
            lambda: Maintenance.objects.get(pk=maintenance.pk).state == "done",
            "the maintenance to end",
        )
    assert not cluster.core().read_node(NODE).spec.unschedulable
    assert row.get().state == "done"
