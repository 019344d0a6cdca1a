"""Maintenance headroom: how many of a pool's nodes can be drained together now, and each
blocker by name (pools/core/headroom.py)."""

from __future__ import annotations

import pytest

from pools.core.headroom import (
    BUDGET,
    DOWN,
    FLOOR,
    GANG,
    SHARED_BUDGETS,
    Budget,
    HeadroomNode,
    HeadroomPod,
    drain_blockers,
    headroom,
    selector_matches,
)

pytestmark = pytest.mark.pure

NODES = [HeadroomNode(f"n{i}") for i in range(6)]


def serving(node: str, i: int = 0, app: str = "chat") -> HeadroomPod:
    return HeadroomPod("ml", f"{app}-{node}-{i}", node, {"app": app})


def chat_budget(allowed: int) -> Budget:
    return Budget("ml", "chat", {"matchLabels": {"app": "chat"}}, allowed)


def test_every_node_in_service_drains_when_nothing_stops_it() -> None:
    found = headroom("p", NODES, [], [])
    assert found.drainable_now == 6 and found.blockers == ()


def test_a_budget_allows_as_many_nodes_as_its_disruptions() -> None:
    pods = [serving(n.name) for n in NODES[:4]]  # one chat pod on each of n0..n3
    found = headroom("p", NODES, pods, [chat_budget(2)])
    # n4 and n5 hold none of its pods, then two of n0..n3.
    assert found.drainable == ("n4", "n5", "n0", "n1")
    (blocker,) = found.blockers
    assert (blocker.kind, blocker.name, blocker.nodes) == (BUDGET, "ml/chat", ("n2", "n3"))
    assert blocker.message == (
        "PodDisruptionBudget ml/chat allows 2 disruptions now: it would refuse to evict its "
        "pods on n2, n3"
    )


def test_a_budget_selects_pods_of_its_namespace_only() -> None:
    other = HeadroomPod("research", "chat-n0", "n0", {"app": "chat"})
    found = headroom("p", NODES, [other], [chat_budget(0)])
    assert found.drainable_now == 6


def test_a_node_with_more_of_a_budgets_pods_than_it_allows_is_kept() -> None:
    pods = [serving("n0", 0), serving("n0", 1)]
    found = headroom("p", NODES[:2], pods, [chat_budget(1)])
    assert found.drainable == ("n1",)
    assert found.blockers[0].nodes == ("n0",)


def test_a_running_gang_keeps_every_node_it_runs_on() -> None:
    gang = "PyTorchJob ml/train"
    pods = [HeadroomPod("ml", f"w{i}", f"n{i}", gang=gang) for i in range(2)]
    lone = HeadroomPod("ml", "solo-0", "n2", gang="Job ml/solo")  # one pod is not a gang
    found = headroom("p", NODES, [*pods, lone], [])
    assert found.drainable == ("n2", "n3", "n4", "n5")
    (blocker,) = found.blockers
    assert (blocker.kind, blocker.name, blocker.nodes) == (GANG, gang, ("n0", "n1"))
    assert blocker.message == f"{gang} is running with 2 pods: draining n0, n1 would stop it"


def test_the_floor_counts_nodes_already_down() -> None:
    nodes = [
        HeadroomNode("n0", cordoned=True),
        HeadroomNode("n1", ready=False),
        HeadroomNode("n2", moving=True),
        *NODES[3:],
    ]
    found = headroom("p", nodes, [], [], min_nodes=2)
    assert (found.in_service, found.drainable_now) == (3, 1)
    kinds = [(b.kind, b.name) for b in found.blockers]
    assert kinds == [(DOWN, "n0"), (DOWN, "n1"), (DOWN, "n2"), (FLOOR, "p")]
    assert [b.message for b in found.blockers[:3]] == [
        "n0 is cordoned",
        "n1 is NotReady",
        "n2 is held by a move",
    ]
    assert (
        found.blockers[3].message
        == "p keeps at least 2 nodes in service: 3 are, so 1 may be drained"
    )
    assert found.blockers[3].nodes == ("n4", "n5")


def test_a_pod_two_budgets_cover_keeps_its_node() -> None:
    pod = serving("n0")
    wide = Budget("ml", "all", {}, 5)  # an empty selector: every pod of the namespace
    found = headroom("p", NODES[:2], [pod], [chat_budget(5), wide])
    assert found.drainable == ("n1",)
    (blocker,) = found.blockers
    assert (blocker.kind, blocker.nodes) == (SHARED_BUDGETS, ("n0",))
    assert "more than one disruption budget covers it" in blocker.message


def test_unknown_budgets_give_no_figure() -> None:
    found = headroom("p", NODES, [], [], budgets_error="the API server answered 503")
    assert found.drainable_now is None
    assert found.as_dict()["drainable_nodes"] == []
    assert found.as_dict()["budgets_error"] == "the API server answered 503"


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        ({"key": "tier", "operator": "In", "values": ["a", "b"]}, {"tier": "b"}, True),
        ({"key": "tier", "operator": "In", "values": ["a"]}, {}, False),
        ({"key": "tier", "operator": "NotIn", "values": ["a"]}, {}, True),
        ({"key": "tier", "operator": "NotIn", "values": ["a"]}, {"tier": "a"}, False),
        ({"key": "tier", "operator": "Exists"}, {"tier": ""}, True),
        ({"key": "tier", "operator": "DoesNotExist"}, {"tier": ""}, False),
    ],
)
def test_selector_expressions(expression: dict, labels: dict, matches: bool) -> None:  # type: ignore[type-arg]
    assert selector_matches({"matchExpressions": [expression]}, labels) is matches


def test_draining_chosen_nodes_together_names_the_budget_they_would_exceed() -> None:
    pods = [serving("n0"), serving("n1"), serving("n2")]
    gang = [HeadroomPod("ml", f"w{i}", f"n{i + 3}", gang="MPIJob ml/x") for i in range(2)]
    budgets = [chat_budget(1)]
    assert drain_blockers(NODES, pods, budgets, ["n0", "n5"]) == []
    (blocker,) = drain_blockers(NODES, pods, budgets, ["n0", "n1"])
    assert (blocker.kind, blocker.nodes) == (BUDGET, ("n0", "n1"))
    assert blocker.message == (
        "PodDisruptionBudget ml/chat allows 1 disruption now: draining n0, n1 would evict 2 "
        "of its pods"
    )
    (held,) = drain_blockers(NODES, [*pods, *gang], budgets, ["n3"])
    assert (held.kind, held.name) == (GANG, "MPIJob ml/x")
