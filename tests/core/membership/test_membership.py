"""A node's stays read back for a window: who was in which pool at each moment, the spans
a figure counts each node for, the changes inside a window, and from when a pool is only
assumed (pools.core.membership)."""

from __future__ import annotations

from pools.core.insights.records import HistoryPod, Window
from pools.core.insights.utilisation import job_history
from pools.core.membership import Change, Membership, Stay

DAY = 86400.0


def lent_on_day_20() -> Membership:
    """n1 in training all along; n2 in mixed (seen first on day 2) and lent to training on
    day 20; n3 in mixed until it went on day 10."""
    return Membership(
        [
            Stay("n1", "training", 0.0, earliest=True),
            Stay("n2", "mixed", 2 * DAY, 20 * DAY, earliest=True),
            Stay("n2", "training", 20 * DAY),
            Stay("n3", "mixed", 0.0, 10 * DAY, earliest=True),
        ]
    )


def test_a_member_all_along_has_one_open_span_and_a_lent_node_only_its_time() -> None:
    found = lent_on_day_20()
    assert found.members("training", DAY, 30 * DAY) == {
        "n1": ((None, None),),
        "n2": ((20 * DAY, None),),
    }
    # Before the loan, the lent node is mixed's, whichever day the window starts.
    assert found.members("mixed", DAY, 30 * DAY) == {
        "n2": ((None, 20 * DAY),),
        "n3": ((None, 10 * DAY),),
    }
    assert found.members("training", DAY, 19 * DAY) == {"n1": ((None, None),)}


def test_a_node_s_first_stay_reaches_back_before_the_portal_saw_it() -> None:
    found = lent_on_day_20()
    assert found.pool_at("n2", 0.0) == "mixed"  # seen on day 2: assumed before
    assert found.pool_at("n2", 25 * DAY) == "training"
    assert found.pool_at("n3", 11 * DAY) is None  # gone
    assert found.assumed_before("mixed", 0.0, 30 * DAY) == 2 * DAY
    assert found.assumed_before("mixed", 3 * DAY, 30 * DAY) is None
    assert found.assumed_before("training", 0.0, 30 * DAY) is None


def test_the_changes_inside_a_window_say_who_joined_and_left_and_when() -> None:
    found = lent_on_day_20()
    assert found.changes("training", DAY, 30 * DAY) == [Change("n2", 20 * DAY, None)]
    assert found.changes("mixed", DAY, 30 * DAY) == [
        Change("n2", None, 20 * DAY),
        Change("n3", None, 10 * DAY),
    ]


def test_a_node_that_left_and_came_back_at_once_is_one_span() -> None:
    found = Membership(
        [
            Stay("n", "p", 0.0, 5 * DAY, earliest=True),
            Stay("n", "p", 5 * DAY, 6 * DAY),
            Stay("n", "q", 6 * DAY, 7 * DAY),
            Stay("n", "p", 7 * DAY),
        ]
    )
    assert found.members("p", DAY, 10 * DAY) == {"n": ((None, 6 * DAY), (7 * DAY, None))}


def test_the_timeline_gives_the_pool_at_the_start_each_change_and_the_departure() -> None:
    found = lent_on_day_20()
    assert found.timeline("n2", DAY) == ("mixed", [(20 * DAY, "training")], None)
    assert found.timeline("n2", 21 * DAY) == ("training", [], None)
    assert found.timeline("n3", DAY) == ("mixed", [], 10 * DAY)
    assert found.timeline("unknown", DAY) == ("", [], None)


def _run(node: str, start: float, end: float, gpus: int = 8) -> HistoryPod:
    return HistoryPod(
        "ns", f"{node}-{start}", node, "training", "Succeeded", gpus, 0, 0, "", "",
        start, start, start, end, "", 0, "", "", 0,
    )  # fmt: skip


def test_the_job_history_counts_a_node_only_for_its_time_in_the_pool() -> None:
    window = Window(0.0, 10 * DAY)
    # n2 joined half-way; a job kept each node busy the whole time it was the pool's.
    pods = [_run("n1", 0.0, 10 * DAY), _run("n2", 5 * DAY, 10 * DAY)]
    spans = {"n1": ((None, None),), "n2": ((5 * DAY, None),)}
    found = job_history(pods, {"n1": 8, "n2": 8}, window, spans)
    assert found.busy_share == 1.0
    assert found.allocated_share == 1.0
    assert found.empty_node_share == 0.0
    # Read as if n2 had been there all along, half its time would be empty.
    along = job_history(pods, {"n1": 8, "n2": 8}, window)
    assert along.busy_share == 0.75
    assert along.empty_node_share == 0.5
