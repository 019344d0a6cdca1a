"""A GPU sharing reconfiguration run end to end against kubesim's `devices` scenario, whose
simulated device plugin restarts with the configuration its node's
nvidia.com/device-plugin.config names and advertises its replicas, and GPU feature discovery
relabels the node. kubesim's own API server only: the simulated device plugin is part of it
(a real cluster's is the GPU operator's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from pools import moves
from pools.core.plugin_configs import parse_plugin_configs
from pools.inventory import inventory_sync
from pools.models import AuditEvent, MoveItem, MoveRequest, Node
from tests.edges.moves.test_reconfigure_execution import actions, run
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in

State = MoveRequest.State
NODE = "h100-whole-000"  # 8 whole H100s, pool training, one 4-GPU job


@pytest.fixture
def sim(tmp_path) -> Iterator[Kubesim]:  # type: ignore[no-untyped-def]
    extra = ["--mig-reconfigure-seconds", "1", "--clock-scale", "30"]
    with kubesim_server(tmp_path, scenario="devices", extra=extra) as server:
        yield server


@pytest.fixture
def portal(db, sim: Kubesim, settings) -> Kubesim:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = str(sim.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    settings.DRAIN_POLL_SECONDS = 0.1
    settings.RECONFIGURE_WAIT_SECONDS = 60
    # "a100-profile" is the site's, but this device plugin has no such configuration.
    settings.DEVICE_PLUGIN_CONFIGS = parse_plugin_configs(
        "default=whole,time-sliced-4=time-slicing:4,a100-profile=time-slicing:2"
    )
    inventory_sync()
    return sim


def approved(node: str, config: str) -> MoveRequest:
    move = moves.reconfiguration_ask(
        requested_by=user_in("requesters", "rita"),
        node_names=[node],
        plugin_config=config,
        reason="notebooks share the GPUs",
        now=timezone.now(),
    )
    return moves.move_approve(
        request=move, approver=user_in("approvers", "arno"), now=timezone.now()
    )


def test_a_sharing_reconfiguration_drains_relabels_waits_and_uncordons(portal: Kubesim) -> None:
    move = approved(NODE, "time-sliced-4")
    assert run(move) == []
    move.refresh_from_db()
    item = move.items.get()
    assert (move.state, item.state) == (State.SUCCEEDED, MoveItem.State.DONE), item.error
    node = portal.core().read_node(NODE)
    labels = node.metadata.labels
    assert labels["nvidia.com/device-plugin.config"] == "time-sliced-4"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert node.status.allocatable["nvidia.com/gpu"] == "32"  # 8 GPUs, 4 replicas each
    assert not node.spec.unschedulable
    steps = actions(move)
    for step in ("move.executing", "node.cordoned", "node.drained", "node.reconfigured"):
        assert step in steps, steps
    assert steps.index("node.drained") < steps.index("node.reconfigured")
    assert steps.index("node.reconfigured") < steps.index("node.uncordoned")
    reconfigured = AuditEvent.objects.get(request=move, action="node.reconfigured")
    assert reconfigured.message == (
        "the device plugin advertises time-sliced-4 (time-slicing, 4 per GPU)"
    )
    # The inventory reads the shared units; the physical GPUs stay 8.
    inventory_sync()
    row = Node.objects.get(name=NODE)
    assert row.devices["units"] == [["shared", "nvidia.com/gpu", "", "time-slicing", 4, 32]]
    assert row.gpu_count == 8


def test_a_configuration_the_plugin_never_advertises_fails_and_leaves_the_node_cordoned(
    portal: Kubesim, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.RECONFIGURE_WAIT_SECONDS = 2
    move = approved("h100-whole-001", "a100-profile")
    assert run(move) == []
    move.refresh_from_db()
    item = move.items.get()
    assert (move.state, item.state) == (State.FAILED, MoveItem.State.FAILED)
    assert "did not advertise a100-profile (time-slicing, 2 per GPU)" in item.error
    assert "stays cordoned" in item.error
    node = portal.core().read_node("h100-whole-001")
    assert node.spec.unschedulable
    assert node.status.allocatable["nvidia.com/gpu"] == "8"  # as before
    assert "node.uncordoned" not in actions(move)
