"""Each advisor rule fires on its scenario and on no other; a dismissal holds until the
evidence changes."""

from __future__ import annotations

import pytest

from pools.core.insights import advisor
from pools.core.insights.advisor import Rule
from tests.insights import scenarios
from tests.insights.conftest import world_insights

pytestmark = pytest.mark.django_db

EXPECTED = {
    "idle": set(),  # idle, but no pool waits for its nodes
    "queue": {Rule.LEND},
    "shortage": set(),  # no pool has nodes to lend
    "oom": set(),  # failures, but none the GPUs' fault
    "mixed_drivers": {Rule.SPLIT},
    "gpu_faults": {Rule.GPU_FAULTS},
    "failure_classes": {Rule.GPU_FAULTS},
    "handmade": {Rule.AUTOMATE},
    "small": {Rule.KEEP_SHARED},
}


def advice_for(name: str) -> list[advisor.Advice]:
    return advisor.advise(list(world_insights(scenarios.SCENARIOS[name]()).values()))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_rule_fires_on_its_scenario_only(name: str) -> None:
    found = advice_for(name)
    assert {a.rule for a in found} == EXPECTED[name]
    for a in found:
        assert a.evidence and 0 < a.confidence <= 1


def test_lending_suggests_a_loan_of_the_idle_nodes_the_queue_needs() -> None:
    (lend,) = advice_for("queue")
    assert lend.pools == ("idle", "queue")
    assert lend.move is not None
    assert lend.move.source == "idle" and lend.move.destination == "queue"
    assert lend.move.loan_days == advisor.LOAN_DAYS
    # At peak one 8-GPU pod waited: one whole node.
    assert lend.move.nodes == ("idle-000",)
    assert "20 GPU pods waited while another pool had room" in lend.evidence[0]
    assert "utilisation 3% on average" in lend.evidence[1]


def test_split_names_the_drivers_and_their_nodes() -> None:
    (split,) = advice_for("mixed_drivers")
    assert split.move is None
    assert split.evidence[0] == "driver versions: 535.161.08 on 3 nodes, 550.54.15 on 5 nodes"


def test_a_dismissal_holds_for_the_same_evidence_and_lifts_when_it_changes() -> None:
    (split,) = advice_for("mixed_drivers")
    assert advisor.visible([split], {split.key: split.fingerprint}) == []
    assert advisor.visible([split], {split.key: "older-evidence"}) == [split]
    assert advisor.visible([split], {"split:other": split.fingerprint}) == [split]
