"""The node lifecycle controller's taints (issue 12.3)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.kubesim.conftest import kubectl, needs_kubectl
from tests.kubesim_process import Kubesim

NODE = "gpu-new-000"


def taints(sim: Kubesim, node: str = NODE) -> list[tuple[str, str]]:
    spec = sim.core().read_node(node).spec
    return [(t.key, t.effect) for t in spec.taints or []]


def set_ready(sim: Kubesim, status: str, node: str = NODE) -> None:
    """The kubelet posts its Ready condition (a PATCH of nodes/status)."""
    core = sim.core()
    conditions: list[dict[str, Any]] = [
        {"type": c.type, "status": status if c.type == "Ready" else c.status}
        for c in core.read_node(node).status.conditions
    ]
    core.patch_node_status(node, {"status": {"conditions": conditions}})


def test_a_cordon_gets_the_unschedulable_taint_in_its_own_write(kubesim: Kubesim) -> None:
    core = kubesim.core()
    answer = core.patch_node(NODE, {"spec": {"unschedulable": True}})
    # The PATCH's answer is the cordon alone; the controller writes the taint right after.
    assert answer.spec.taints is None
    node = core.read_node(NODE)
    (taint,) = node.spec.taints
    assert (taint.key, taint.effect) == ("node.kubernetes.io/unschedulable", "NoSchedule")
    assert taint.time_added is not None
    assert int(node.metadata.resource_version) > int(answer.metadata.resource_version)
    # So a PATCH guarded by the resourceVersion the cordon answered meets a 409.
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            NODE,
            {
                "metadata": {
                    "resourceVersion": answer.metadata.resource_version,
                    "labels": {"a": "b"},
                }
            },
        )
    assert caught.value.status == 409
    core.patch_node(NODE, {"spec": {"unschedulable": None}})
    assert taints(kubesim) == []


def test_a_node_created_through_the_api_is_admitted_not_ready(kubesim_shared: Kubesim) -> None:
    """TaintNodesByCondition's taint and the defaulted status on the create's answer (K5);
    the lifecycle controller then keeps the taint only while Ready is False."""
    core = kubesim_shared.core()
    created = core.create_node({"metadata": {"name": "bare-node"}})
    assert [(t.key, t.effect) for t in created.spec.taints] == [
        ("node.kubernetes.io/not-ready", "NoSchedule")
    ]
    assert created.status.daemon_endpoints.kubelet_endpoint.port == 0
    assert created.status.node_info.kubelet_version == ""
    assert taints(kubesim_shared, "bare-node") == []  # no Ready condition: nothing to taint
    down = core.create_node(
        {
            "metadata": {"name": "down-node"},
            "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        }
    )
    assert [t.key for t in down.spec.taints] == ["gpu", "node.kubernetes.io/not-ready"]
    assert down.status.allocatable == {"nvidia.com/gpu": "8"}
    assert ("node.kubernetes.io/not-ready", "NoSchedule") in taints(kubesim_shared, "down-node")
    for name in ("bare-node", "down-node"):
        core.delete_node(name)


def test_not_ready_gets_no_schedule_now_and_no_execute_after_a_delay(kubesim: Kubesim) -> None:
    set_ready(kubesim, "False")
    assert taints(kubesim) == [("node.kubernetes.io/not-ready", "NoSchedule")]
    kubesim.control("clock", {"advance": 5})
    assert taints(kubesim) == [
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
    ]
    set_ready(kubesim, "True")
    assert taints(kubesim) == [("node.kubernetes.io/not-ready", "NoExecute")]
    kubesim.control("clock", {"advance": 5})
    assert taints(kubesim) == []


def test_a_silent_kubelet_makes_the_node_unreachable(kubesim: Kubesim) -> None:
    kubesim.control("kubelet", {"node": NODE, "posting": False})
    kubesim.control("clock", {"advance": 49})
    assert taints(kubesim) == []
    kubesim.control("clock", {"advance": 1})
    ready = next(c for c in kubesim.core().read_node(NODE).status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason, ready.message) == (
        "Unknown",
        "NodeStatusUnknown",
        "Kubelet stopped posting node status.",
    )
    assert taints(kubesim) == [("node.kubernetes.io/unreachable", "NoSchedule")]
    kubesim.control("clock", {"advance": 5})
    assert ("node.kubernetes.io/unreachable", "NoExecute") in taints(kubesim)


def test_the_controller_keeps_its_taints_and_leaves_others_alone(kubesim: Kubesim) -> None:
    core = kubesim.core()
    core.patch_node(NODE, {"spec": {"unschedulable": True}})
    # A writer that replaces the list without the system taint: the controller puts it back.
    core.patch_node(
        NODE, {"spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]}}
    )
    assert taints(kubesim) == [
        ("team", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    core.patch_node(NODE, {"spec": {"unschedulable": None}})
    assert taints(kubesim) == [("team", "NoSchedule")]


def test_a_seeded_down_node_carries_the_unreachable_taints(kubesim_shared: Kubesim) -> None:
    assert taints(kubesim_shared, "a100-reserve-down-000") == [
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    ]


def test_a_kubelet_report_before_a_write_causes_a_409(kubesim: Kubesim) -> None:
    core = kubesim.core()
    read = core.read_node(NODE)
    kubesim.control("faults", {"ready_before_write": {NODE: "False"}})
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            NODE,
            {"metadata": {"resourceVersion": read.metadata.resource_version, "labels": {"a": "b"}}},
        )
    assert caught.value.status == 409
    assert taints(kubesim) == [("node.kubernetes.io/not-ready", "NoSchedule")]


@needs_kubectl
def test_kubectl_cordon_shows_the_taint(tls_kubesim: Kubesim) -> None:
    assert kubectl(tls_kubesim, "cordon", NODE).stdout.strip() == f"node/{NODE} cordoned"
    node = json.loads(kubectl(tls_kubesim, "get", "node", NODE, "-o", "json").stdout)
    assert [t["key"] for t in node["spec"]["taints"]] == ["node.kubernetes.io/unschedulable"]
    described = kubectl(tls_kubesim, "describe", "node", NODE).stdout
    assert "node.kubernetes.io/unschedulable:NoSchedule" in described
    kubectl(tls_kubesim, "uncordon", NODE)
    node = json.loads(kubectl(tls_kubesim, "get", "node", NODE, "-o", "json").stdout)
    assert "taints" not in node["spec"]
