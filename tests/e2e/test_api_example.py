"""docs/api.md's automation example, run against a live portal, worker and cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pools.inventory import inventory_sync
from pools.tokens import token_create
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in
from tests.servers import RedisServer
from tests.workers import celery_worker

pytestmark = pytest.mark.both_backends

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_the_python_example_moves_a_node_and_waits(
    live_server,
    cluster: Kubesim,  # type: ignore[no-untyped-def]
    redis: RedisServer,
    tmp_path: Path,
) -> None:
    inventory_sync()
    requester = token_create(user=user_in("requesters", "ci-bot"), name="ci")[1]
    approver = token_create(user=user_in("approvers", "lead"), name="lead")[1]
    env = {
        **os.environ,
        "PORTAL_URL": live_server.url,
        "REQUESTER_TOKEN": requester,
        "APPROVER_TOKEN": approver,
        "TIMEOUT_SECONDS": "60",
    }
    with celery_worker(tmp_path):
        result = subprocess.run(
            [
                sys.executable,
                "docs/examples/move_node.py",
                "gpu-new-000",
                "inference",
                "serving capacity for the launch",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gpu-new-000: done" in result.stdout
    assert result.stdout.strip().endswith("succeeded")
    node = cluster.core().read_node("gpu-new-000")
    assert node.metadata.labels["gpu-pool"] == "inference"
    assert [t.key for t in node.spec.taints] == ["workload-inference"]
