"""Each indicator against a scenario where the right answer is known (tests/insights/
scenarios.py): rows in the database, read by the same selectors as the pages, computed by
the pure core."""

from __future__ import annotations

import pytest

from pools.core.insights.failures import Cause
from pools.core.insights.queueing import QueueCause
from tests.insights import scenarios
from tests.insights.conftest import world_insights

pytestmark = pytest.mark.django_db


def test_idle_pool_is_below_target_with_idle_whole_nodes_and_clear_gaps() -> None:
    found = world_insights(scenarios.idle())["idle"]
    u = found.utilisation
    assert (u.average, u.p95, u.target) == (3.0, 3.0, 60.0)
    assert u.below_target and not u.spiky
    assert u.idle_node_share == 1.0
    # One hour of work a day on each node: 23 h (less the bind and start) between jobs.
    assert u.gaps.count == 6 * 29
    assert u.gaps.p50 == pytest.approx(23 * 3600, abs=60)
    assert u.clear_gaps
    assert u.busy_share == pytest.approx(1 / 24, rel=0.01)
    assert found.queue.queued == 0 and found.failures.total == 0
    assert found.pool.lendable and len(found.pool.lendable) == 6


def test_queueing_pool_waits_because_its_selection_is_restricted() -> None:
    found = world_insights(scenarios.queue())
    q = found["queue"].queue
    assert q.queued == 20
    assert q.count(QueueCause.RESTRICTED) == 20
    assert q.count(QueueCause.SHORTAGE) == q.count(QueueCause.OWN_POOL_ROOM) == 0
    restricted = q.by_cause[QueueCause.RESTRICTED]
    assert restricted.p50 == restricted.max == 2 * 3600
    assert (q.first_half, q.second_half) == (6, 14) and q.growing
    assert q.peak_waiting_gpus == 8
    assert q.waits.max == 2 * 3600 and q.waits.p50 == 5
    assert found["idle"].queue.queued == 0


def test_queueing_pool_waits_for_plain_shortage_when_no_pool_has_room() -> None:
    q = world_insights(scenarios.shortage())["queue"].queue
    assert q.count(QueueCause.SHORTAGE) == 20
    assert q.count(QueueCause.RESTRICTED) == 0


def test_oom_failures_are_told_apart_from_the_rest() -> None:
    f = world_insights(scenarios.oom())["oom"].failures
    assert f.counts[Cause.OOM] == 9
    assert f.counts[Cause.IMAGE] == 1
    assert f.counts[Cause.GPU_FAULT] == f.counts[Cause.EVICTION] == f.counts[Cause.OTHER] == 0
    assert f.total == 10 and f.main_cause == Cause.OOM
    assert sum(sum(c.values()) for _, c in f.trend) == 10
    assert len(f.examples[Cause.OOM]) == 5  # the latest five
    assert {e.reason for e in f.examples[Cause.OOM]} <= {"OOMKilled", "Error"}


def test_gpu_faults_come_from_messages_and_from_xid_errors_while_the_pod_ran() -> None:
    f = world_insights(scenarios.gpu_faults())["faults"].failures
    assert f.counts[Cause.GPU_FAULT] == 5  # four by their message, one by its node's XID
    assert f.counts[Cause.OOM] == 1
    assert f.main_cause == Cause.GPU_FAULT


def test_mixed_drivers_are_scored_with_the_odd_nodes_listed() -> None:
    r = world_insights(scenarios.mixed_drivers())["drivers"].replacement
    driver = r.dimension("driver")
    assert driver is not None
    assert driver.values == {"550.54.15": 5, "535.161.08": 3}
    assert r.mixes_models_or_drivers == ["driver"]
    assert sorted(r.odd_nodes) == ["drivers-005", "drivers-006", "drivers-007"]
    assert r.odd_nodes["drivers-005"] == ["driver version 535.161.08"]
    assert r.level == "high" and r.hand_score == 0


def test_uniform_pools_are_easy_to_replace() -> None:
    world = scenarios.oom()
    r = world_insights(world)["oom"].replacement
    assert (r.score, r.odd_nodes, r.level) == (0, {}, "low")


def test_hand_configuration_is_scored_apart_from_the_model_and_driver_mix() -> None:
    r = world_insights(scenarios.handmade())["handmade"].replacement
    assert r.mixes_models_or_drivers == []
    assert r.hand_score >= 15 and r.level == "high"
    assert r.odd_nodes["handmade-000"] == [
        "hand-set labels: rack-setup=manual",
        "hand-set taints: maintenance-by=ops:NoSchedule",
    ]
    assert "kernel 6.5.0-35-generic" in r.odd_nodes["handmade-004"]


def test_small_spiky_pool_hides_its_peaks_in_the_average() -> None:
    u = world_insights(scenarios.small())["small"].utilisation
    assert u.average == pytest.approx((2 * 100 + 22 * 2) / 24)
    assert u.p95 == 100.0 and u.spiky


def test_a_mig_pool_is_measured_in_its_instances() -> None:
    """Pods of one MIG instance are the pool's GPU pods: the time they hold instances is
    measured against the instances the nodes offer (112), a node whose instances are held
    is not lendable, and the pods that waited for one are the queue."""
    found = world_insights(scenarios.mig_slices())["slices"]
    u = found.utilisation
    # 28 of 112 instances held all along, and one more an hour a day.
    assert u.allocated_share == pytest.approx((28 + 1 / 24) / 112, rel=0.01)
    assert [name for name, _ in found.pool.lendable] == ["slices-001"]
    assert found.pool.free_now == 112 - 28
    assert found.queue.queued == scenarios.DAYS
    assert found.queue.peak_waiting_gpus == 1
