"""The metrics readiness check looks at every counter the pages draw, not utilisation
alone: a node whose temperature, framebuffer, power or XID series stopped arriving fails."""

from __future__ import annotations

from pools.core.insights.readiness import Status, metrics_arrive
from pools.core.insights.records import InsightNode
from pools.metrics.insights import COUNTERS

ALL = {kind: 8 for kind in COUNTERS}


def node(name: str, *, ready: bool = True, **reporting: int) -> InsightNode:
    counters = {**ALL, **{k.replace("_", " "): v for k, v in reporting.items()}}
    return InsightNode(
        name, "training", 8, ready=ready, gpus_reporting=counters["utilisation"],
        counters_reporting=counters,
    )  # fmt: skip


def test_the_check_covers_every_counter_the_pages_draw() -> None:
    assert set(COUNTERS) == {"utilisation", "framebuffer", "temperature", "power", "XID errors"}


def test_a_node_whose_temperature_stopped_arriving_fails_though_its_utilisation_arrives() -> None:
    check = metrics_arrive([node("n1"), node("n2", temperature=0)], None, COUNTERS)
    assert check.status == Status.FAIL
    assert check.concerned == ["n2 (temperature: 0 of 8 GPUs report)"]


def test_each_missing_counter_is_named() -> None:
    check = metrics_arrive([node("n1", framebuffer=7, XID_errors=0, power=4)], None, COUNTERS)
    assert check.concerned == [
        "n1 (framebuffer: 7 of 8 GPUs report; power: 4 of 8 GPUs report; "
        "XID errors: 0 of 8 GPUs report)"
    ]


def test_every_counter_arriving_passes_and_a_node_not_ready_is_not_counted() -> None:
    check = metrics_arrive([node("n1"), node("down", ready=False, power=0)], None, COUNTERS)
    assert check.status == Status.PASS
    assert "temperature" in check.detail


def test_prometheus_down_is_unknown() -> None:
    assert metrics_arrive([node("n1")], "connection refused", COUNTERS).status == Status.UNKNOWN
