"""Each advisor rule fires on its scenario and on no other; a dismissal holds until the
evidence changes."""

from __future__ import annotations

import pytest

from pools.core.insights import advisor
from pools.core.insights.advisor import Rule
from pools.insights.previews import previewed
from pools.models import GpuPod, Node, Pool
from tests.insights import scenarios
from tests.insights.conftest import world_insights

pytestmark = pytest.mark.django_db

EXPECTED = {
    "idle": set(),  # idle, but no pool waits for its nodes
    "queue": {Rule.LEND},
    "shortage": set(),  # no pool has nodes to lend
    "fragments": {Rule.LEND},  # no node wholly idle, but room in pieces
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


def test_lending_takes_room_in_pieces_when_no_node_is_wholly_idle() -> None:
    (lend,) = advice_for("fragments")
    assert lend.pools == ("spare", "queue") and lend.move is not None
    # At peak one 4-GPU pod waited: the emptiest node (6 GPUs free) covers it, its small
    # job left running.
    assert lend.move.nodes == ("spare-000",)
    assert (lend.move.busy, lend.move.free_gpus) == (1, 6)
    assert lend.move.reason() == "Advisor: loan for 7 days of 1 node from spare"
    assert "48 GPUs free now on the nodes that could move" in lend.evidence[1]
    assert "1 of the 1 nodes run pods now" in lend.evidence[2]


def test_the_suggested_loan_is_checked_by_the_move_s_own_preview() -> None:
    found = previewed(advice_for("fragments"), now=scenarios.NOW)
    (lend,) = found
    assert lend.move is not None and lend.move.previewed
    (waiting,) = GpuPod.objects.pending()
    # The queue's pending pod asks for the queue's nodes: the loan lets it start.
    assert lend.move.would_start == (f"{waiting.namespace}/{waiting.name}",)
    assert lend.move.refusals == ()
    assert "1 pending pod would start on these nodes" in lend.evidence[-1]


def test_a_suggestion_the_request_would_refuse_says_why_and_is_less_sure() -> None:
    (before,) = advice_for("fragments")
    assert before.move is not None
    # The pool's floor was raised since the indicators were read: the request refuses it.
    Pool.objects.filter(name="spare").update(min_nodes=8)
    (after,) = previewed([before], now=scenarios.NOW)
    assert after.move is not None and after.move.refusals
    assert after.confidence == round(before.confidence * 0.5, 2)
    assert any(line.startswith("The request would be refused now") for line in after.evidence)


def test_a_not_ready_node_is_never_lent_as_idle() -> None:
    scenarios.queue()
    Node.objects.filter(pool__name="idle").update(ready=False)
    gathered = world_insights(scenarios.World(["idle", "queue"]))
    assert gathered["idle"].pool.candidates == ()
    assert advisor.advise(list(gathered.values())) == []


def test_split_names_the_drivers_and_their_nodes() -> None:
    (split,) = advice_for("mixed_drivers")
    assert split.move is None
    assert split.evidence[0] == "driver versions: 535.161.08 on 3 nodes, 550.54.15 on 5 nodes"


def test_a_dismissal_holds_for_the_same_evidence_and_lifts_when_it_changes() -> None:
    (split,) = advice_for("mixed_drivers")
    assert advisor.visible([split], {split.key: split.fingerprint}) == []
    assert advisor.visible([split], {split.key: "older-evidence"}) == [split]
    assert advisor.visible([split], {"split:other": split.fingerprint}) == [split]
