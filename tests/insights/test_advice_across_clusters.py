"""The advisor across clusters: a pool whose pods wait for want of room in its own cluster,
while a pool of another cluster is under-used with GPUs free now, is told to send the work
there, with no move (a node never changes clusters); and not when the other cluster has no
room it can use, or a loan inside its own cluster is suggested instead."""

from __future__ import annotations

import pytest

from pools.core.cluster_scope import cluster_scope
from pools.core.clusters import ClusterAccess
from pools.core.insights.advisor import Rule
from pools.core.insights.elsewhere import idle_pools, send_elsewhere_advice
from pools.insights import gather
from pools.insights.dismissals import advice_dismiss
from pools.models import AdviceDismissal, Pool
from tests.insights import scenarios
from tests.insights.conftest import world_insights
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
EAST = "us-east"


@pytest.fixture
def east(settings) -> None:  # type: ignore[no-untyped-def]
    settings.OTHER_CLUSTERS = {EAST: ClusterAccess(EAST)}


def east_idle() -> list:  # type: ignore[type-arg]
    """us-east with the idle scenario: 6 A100 nodes at 3 %, as its advisor reads them."""
    with cluster_scope(EAST):
        return idle_pools(EAST, list(world_insights(scenarios.idle()).values()))


def test_a_pool_short_of_room_is_sent_to_the_idle_pool_of_another_cluster(east) -> None:  # type: ignore[no-untyped-def]
    idle = east_idle()
    assert [(i.cluster, i.pool, i.free_now, i.models) for i in idle] == [
        (EAST, "idle", 48, ("NVIDIA-A100-SXM4-80GB",))
    ]
    home = list(world_insights(scenarios.shortage()).values())
    (advice,) = send_elsewhere_advice(home, set(), idle)
    assert advice.rule == Rule.SEND_ELSEWHERE
    assert advice.pools == ("queue", f"{EAST}/idle")
    assert advice.title == f"Send queue's waiting jobs to idle in cluster {EAST}"
    assert advice.move is None  # nodes never move between clusters
    assert "20 GPU pods waited for plain shortage (no pool had room)" in advice.evidence[0]
    assert f"idle in cluster {EAST}: 3% used against a target of 60%" in advice.evidence[1]
    assert "48 GPUs free now" in advice.evidence[1]
    assert "A node cannot move between clusters" in advice.evidence[2]
    assert 0 < advice.confidence <= 1


def test_no_suggestion_without_room_elsewhere_it_can_use(east) -> None:  # type: ignore[no-untyped-def]
    idle = east_idle()
    home = list(world_insights(scenarios.shortage()).values())
    assert send_elsewhere_advice(home, set(), []) == []
    # The waiting pool takes H100s only: the idle A100s elsewhere are no help.
    Pool.objects.filter(name="queue").update(accepted_gpu_models=["NVIDIA-H100-80GB-HBM3"])
    home = list(world_insights(scenarios.World([])).values())
    assert send_elsewhere_advice(home, set(), idle) == []


def test_a_loan_inside_the_cluster_comes_before_another_cluster(east) -> None:  # type: ignore[no-untyped-def]
    """The queue scenario's pods waited while its own cluster's idle pool had room: the
    advisor lends those nodes, and does not send the work away."""
    idle = east_idle()
    home = list(world_insights(scenarios.queue()).values())
    assert send_elsewhere_advice(home, {"queue"}, idle) == []
    # Without the loan, the same wait would be sent elsewhere.
    (advice,) = send_elsewhere_advice(home, set(), idle)
    assert "while another pool had room" not in advice.evidence[0]
    assert "node selection restricted" in advice.evidence[0]


def test_the_advice_of_a_cluster_reads_the_other_clusters_idle_pools(east, settings) -> None:  # type: ignore[no-untyped-def]
    """Through the domain, as the advice page and API read it: the other cluster's pools read
    in its own scope (no Prometheus here: allocation stands in for utilisation)."""
    settings.PROMETHEUS_URL = ""
    with cluster_scope(EAST):
        scenarios.idle()
    scenarios.shortage()
    found = gather.advice(days=scenarios.DAYS, now=scenarios.NOW)
    sent = [a for a in found if a.rule == Rule.SEND_ELSEWHERE]
    assert [a.pools for a in sent] == [("queue", f"{EAST}/idle")]
    assert "allocated against a target" in sent[0].evidence[1]
    # us-east's own advice sends nothing back: its pool does not wait.
    with cluster_scope(EAST):
        assert not [
            a
            for a in gather.advice(days=scenarios.DAYS, now=scenarios.NOW)
            if a.rule == Rule.SEND_ELSEWHERE
        ]


def test_a_dismissal_holds_in_its_own_cluster_only(east, settings) -> None:  # type: ignore[no-untyped-def]
    """Both clusters have the same shortage under the same pool name: dismissing it in one
    leaves the other's suggestion standing."""
    settings.PROMETHEUS_URL = ""
    for cluster in (settings.CLUSTER_NAME, EAST):
        with cluster_scope(cluster):
            scenarios.mixed_drivers()
    days, now = scenarios.DAYS, scenarios.NOW
    (split,) = [a for a in gather.advice(days=days, now=now) if a.rule == Rule.SPLIT]
    advice_dismiss(
        key=split.key, reason="a test bench", user=user_in("requesters"), days=days, now=now
    )
    assert not [a for a in gather.advice(days=days, now=now) if a.key == split.key]
    with cluster_scope(EAST):
        assert [a.key for a in gather.advice(days=days, now=now) if a.rule == Rule.SPLIT] == [
            split.key
        ]
        assert not AdviceDismissal.objects.exists()
