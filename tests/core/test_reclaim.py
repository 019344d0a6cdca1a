"""Reclaiming idle GPUs, the pure part: the candidates, the teams' sums and the policy's
bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pools.core.reclaim import (
    Candidate,
    HeldPod,
    Policy,
    Seen,
    policy_problems,
    prefilled_reason,
    reclaim_candidates,
    reclaim_fate,
    team_idle_hours,
)
from pools.metrics.queries import idle_hours_query, idle_pods_query


def pod(name: str, units: int = 1, team: str = "", opted_out: bool = False) -> HeldPod:
    return HeldPod("ns", name, "node-1", units, team, "", opted_out, "")


def test_only_pods_idle_for_the_window_are_candidates_most_gpu_hours_first() -> None:
    pods = [pod("a"), pod("b", units=4), pod("c"), pod("d", opted_out=True)]
    idle = {("ns", "a"), ("ns", "b"), ("ns", "d")}
    hours = {("ns", "a"): 30.0, ("ns", "b"): 2.0}
    found = reclaim_candidates(pods, idle, hours, for_hours=4)
    assert [(c.pod.name, c.idle_hours, c.gpu_hours) for c in found] == [
        ("a", 30.0, 30.0),
        ("b", 4.0, 16.0),  # never fewer hours than the window that found it
        ("d", 4.0, 4.0),
    ]
    assert found[2].as_dict()["opted_out"] is True


def test_teams_sum_their_pods_and_a_pod_without_a_team_counts_under_its_namespace() -> None:
    pods = [pod("a", team="vision"), pod("b", units=2, team="vision"), pod("c")]
    week = {("ns", "a"): 1.0, ("ns", "b"): 2.0}
    month = {("ns", "a"): 10.0, ("ns", "b"): 2.0, ("ns", "c"): 3.0}
    teams = team_idle_hours(pods, week, month)
    assert [(t.team, t.gpu_hours_7d, t.gpu_hours_30d, t.pods) for t in teams] == [
        ("vision", 5.0, 14.0, 2),
        ("namespace ns", 0.0, 3.0, 1),
    ]


def test_the_policys_bounds() -> None:
    assert policy_problems(Policy(True, 5, 4, 24)) == {}
    assert set(policy_problems(Policy(True, 101, 0, -1))) == {
        "below_percent",
        "for_hours",
        "grace_hours",
    }


def test_the_queries_read_whole_gpus_and_mig_instances_per_pod() -> None:
    idle = idle_pods_query("exported_pod", "exported_namespace", 4, 5)
    assert idle == (
        "max by (exported_namespace, exported_pod) "
        '(max_over_time(DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}[4h]) or '
        '100 * max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod!="", GPU_I_ID!=""}[4h]))'
        " < 5"
    )
    hours = idle_hours_query("exported_pod", "exported_namespace", 7, 1)
    assert hours.startswith("sum_over_time((max by (exported_namespace, exported_pod) ")
    assert hours.endswith("< bool 1)[7d:1m]) * 0.0166667")


# --- what becomes of an open reclaim at a sweep


NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
LATER, EARLIER = NOW + timedelta(hours=1), NOW - timedelta(hours=1)
IDLE, BUSY, GONE = Seen(True, True, False), Seen(True, False, False), Seen(False, False, False)


@pytest.mark.parametrize(
    ("state", "seen", "grace_until", "expected"),
    [
        ("noticed", IDLE, LATER, None),  # the grace runs
        ("noticed", IDLE, EARLIER, ("due", False)),
        ("noticed", IDLE, NOW, ("due", False)),  # a grace of 0 h
        ("due", IDLE, EARLIER, None),  # waits to be filed
        ("requested", IDLE, EARLIER, None),
        ("approved", IDLE, EARLIER, None),  # the eviction's
        ("noticed", BUSY, LATER, ("recovered", True)),
        ("requested", BUSY, EARLIER, ("recovered", True)),
        ("approved", BUSY, EARLIER, ("recovered", True)),  # never evict a pod that works
        ("due", GONE, EARLIER, ("recovered", True)),
        ("approved", GONE, EARLIER, None),  # the eviction step reads 404 itself
        ("rejected", IDLE, EARLIER, None),  # kept while it stays idle
        ("rejected", BUSY, EARLIER, ("rejected", True)),  # closed: noticed afresh later
        ("requested", Seen(True, True, True), EARLIER, ("opted_out", True)),
        ("approved", Seen(True, False, True), EARLIER, ("opted_out", True)),
        # No GPU series at all: its work is unknown, nothing is decided.
        ("noticed", Seen(True, False, False, reporting=False), EARLIER, None),
        ("rejected", Seen(True, False, False, reporting=False), EARLIER, None),
        # Its node moved to another pool: not this pool's to reclaim, even approved.
        ("approved", Seen(False, False, False, moved_to="training"), EARLIER, ("cancelled", True)),
        ("rejected", Seen(False, False, False, moved_to="training"), EARLIER, ("cancelled", True)),
    ],
)
def test_reclaim_fate(
    state: str, seen: Seen, grace_until: datetime, expected: tuple[str, bool] | None
) -> None:
    fate = reclaim_fate(state, seen, grace_until=grace_until, now=NOW)
    assert ((fate.state, fate.finished) if fate else None) == expected
    if fate is not None:
        assert fate.why


def test_the_prefilled_request_states_the_evidence_and_the_notice() -> None:
    pod = HeldPod("ml-serving", "embedder-0", "a100-infer-000", 2, "", "@oncall", False, "")
    text = prefilled_reason(Candidate(pod, 6.0, 12.0), below_percent=5, for_hours=4, told_at=NOW)
    assert text == (
        "ml-serving/embedder-0 held 2 GPU units on a100-infer-000 under 5 % for 4 h or more "
        "(12 GPU-hours idle over the last week); its owner (namespace ml-serving, @oncall) "
        "was told at 2026-12-03 12:00 UTC."
    )
