"""A MIG reconfiguration run end to end against kubesim's `mig` scenario, whose simulated
MIG manager repartitions a node when its nvidia.com/mig.config changes (and only once no
GPU pod is left on it), then sets nvidia.com/mig.config.state. kubesim's own API server
only: the simulated MIG manager is part of it (a real cluster's is the GPU operator's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from pools import moves
from pools.inventory import inventory_sync
from pools.models import AuditEvent, MoveItem, MoveRequest, Node
from pools.moves.execution import run as execution
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in

State = MoveRequest.State


@pytest.fixture
def sim(tmp_path) -> Iterator[Kubesim]:  # type: ignore[no-untyped-def]
    # A fast cluster clock: the drained pods' grace periods pass in a moment.
    extra = ["--mig-reconfigure-seconds", "1", "--clock-scale", "30"]
    with kubesim_server(tmp_path, scenario="mig", extra=extra) as server:
        yield server


@pytest.fixture
def portal(db, sim: Kubesim, settings) -> Kubesim:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    settings.DRAIN_POLL_SECONDS = 0.1
    settings.RECONFIGURE_WAIT_SECONDS = 60
    inventory_sync()
    return sim


def approved(node: str, config: str) -> MoveRequest:
    move = moves.reconfiguration_ask(
        requested_by=user_in("requesters", "rita"),
        node_names=[node],
        mig_config=config,
        reason="bigger slices for the new model",
        now=timezone.now(),
    )
    return moves.move_approve(
        request=move, approver=user_in("approvers", "arno"), now=timezone.now()
    )


def run(move: MoveRequest) -> list[int]:
    return execution.execute_items(execution.start_request(move.pk))


def actions(move: MoveRequest) -> list[str]:
    return list(
        AuditEvent.objects.filter(request=move).order_by("id").values_list("action", flat=True)
    )


def test_a_reconfiguration_drains_relabels_waits_and_uncordons(portal: Kubesim) -> None:
    move = approved("a100-mig-000", "all-3g.40gb")
    assert run(move) == []
    move.refresh_from_db()
    item = move.items.get()
    assert (move.state, item.state) == (State.SUCCEEDED, MoveItem.State.DONE), item.error
    node = portal.core().read_node("a100-mig-000")
    labels = node.metadata.labels
    assert labels["nvidia.com/mig.config"] == "all-3g.40gb"
    assert labels["nvidia.com/mig.config.state"] == "success"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"
    assert node.status.allocatable["nvidia.com/gpu"] == "16"  # 8 GPUs, 2 instances each
    assert not node.spec.unschedulable
    # Every step is in the audit log, in the order it happened.
    steps = actions(move)
    for step in ("move.executing", "node.cordoned", "node.drained", "node.reconfigured"):
        assert step in steps, steps
    assert steps.index("node.cordoned") < steps.index("node.drained")
    assert steps.index("node.drained") < steps.index("node.reconfigured")
    assert steps.index("node.reconfigured") < steps.index("node.uncordoned")
    # The inventory reads the new units once the node is read again.
    inventory_sync()
    row = Node.objects.get(name="a100-mig-000")
    assert row.devices["units"] == [["mig", "nvidia.com/gpu", "3g.40gb", "", 1, 16]]
    assert row.gpu_count == 8


def test_a_failed_reconfiguration_is_recorded_and_leaves_the_node_cordoned(
    portal: Kubesim,
) -> None:
    portal.control("faults", {"mig_failures": {"a100-mig-001": 1}})
    move = approved("a100-mig-001", "all-7g.80gb")
    assert run(move) == []
    move.refresh_from_db()
    item = move.items.get()
    assert (move.state, item.state) == (State.FAILED, MoveItem.State.FAILED)
    assert "could not apply all-7g.80gb on a100-mig-001" in item.error
    assert "stays cordoned" in item.error
    node = portal.core().read_node("a100-mig-001")
    assert node.spec.unschedulable
    assert node.metadata.labels["nvidia.com/mig.config.state"] == "failed"
    assert node.status.allocatable["nvidia.com/gpu"] == "56"  # the old layout still
    assert "node.uncordoned" not in actions(move)
