"""The GPU-fault drill counts the node's jobs, not the pods that belong on every GPU node:
dcgm-exporter and the device plugin (DaemonSets) stay on a node with a faulty GPU by design,
so counting them failed the "jobs moved" check of a cluster that did move its jobs."""

from __future__ import annotations

from typing import Any

import pytest

from pools.core.drills import GpuFaultObservation, gpu_fault_checks
from pools.drills import gpu_fault
from pools.models import Node
from tests.factories import Pod, gpu_node

pytestmark = pytest.mark.django_db
NODE = "a100-train-000"


def on_node(monkeypatch: pytest.MonkeyPatch, row: Node) -> None:
    # The node as the API server returns it is the row's own: only the pods matter here.
    monkeypatch.setattr(gpu_fault, "read_node", lambda name: name)
    monkeypatch.setattr(gpu_fault, "inventory_refresh_node", lambda raw: row)


def test_the_jobs_on_a_faulty_node_leave_out_daemonset_pods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = gpu_node(
        NODE,
        "training",
        pods=(
            Pod("nvidia-dcgm-exporter", "gpu-operator", 0, "DaemonSet"),
            Pod("nvidia-device-plugin", "gpu-operator", 0, "DaemonSet"),
            Pod("llm-pretrain", "ml-training", 8, "Job"),
        ),
    )
    assert len(row.pods) == 3
    on_node(monkeypatch, row)
    before = gpu_fault._pods_on(NODE)
    assert before == [f"ml-training/llm-pretrain-{NODE}"]
    # The job left; the DaemonSet pods stayed, as they do on every node: the check passes.
    row.pods = [p for p in row.pods if p["owner_kind"] == "DaemonSet"]
    during: dict[str, Any] = {"pods_now": gpu_fault._pods_on(NODE)}
    observation = GpuFaultObservation(
        node=NODE,
        gpu=0,
        xid=79,
        xid_seen=79,
        metrics_error="",
        pods_before=tuple(before),
        pods_still=tuple(p for p in before if p in set(during["pods_now"])),
        pending_before=0,
        pending_during=0,
        spare_nodes=1,
        restored=True,
    )
    moved = next(c for c in gpu_fault_checks(observation) if c.name == "jobs_moved")
    assert moved.status == "pass", moved
