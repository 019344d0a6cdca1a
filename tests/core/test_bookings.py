"""Bookings, the pure part: each conflict named with what it overlaps and the moment, and
each bad field of a request named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pools.core.bookings import (
    CAPACITY,
    FLOOR,
    LENT,
    NODES,
    BookingAsked,
    Holding,
    PoolShape,
    Window,
    booking_conflicts,
    booking_problems,
    nodes_for_gpus,
)

MONDAY = datetime(2027, 1, 4, 8, tzinfo=UTC)
H100 = "NVIDIA-H100-80GB-HBM3"
POOL = PoolShape("inference", {f"h-{i}": (H100, 8) for i in range(4)}, min_nodes=1)


def window(start_hours: float, end_hours: float) -> Window:
    return Window(MONDAY + timedelta(hours=start_hours), MONDAY + timedelta(hours=end_hours))


def test_no_conflict_in_an_empty_calendar() -> None:
    asked = Holding("this booking", window(0, 48), frozenset({"h-0", "h-1"}))
    assert booking_conflicts(asked, POOL, []) == []


def test_the_same_nodes_booked_over_an_overlapping_window_are_named_with_the_moment() -> None:
    asked = Holding("this booking", window(0, 48), frozenset({"h-0", "h-1"}))
    other = Holding("booking #7", window(24, 72), frozenset({"h-1", "h-2"}))
    (conflict,) = booking_conflicts(asked, POOL, [other])
    assert conflict.kind == NODES and conflict.with_ == ("booking #7",)
    assert conflict.moment == MONDAY + timedelta(hours=24)
    assert conflict.message == (
        "h-1 is booked by booking #7 until 2027-01-07 08:00 UTC, from 2027-01-05 08:00 UTC."
    )
    # Back to back is no overlap.
    later = Holding("booking #8", window(48, 72), frozenset({"h-0"}))
    assert booking_conflicts(asked, POOL, [later]) == []


def test_a_node_lent_then_is_a_conflict_of_its_own_kind() -> None:
    asked = Holding("this booking", window(0, 48), frozenset({"h-3"}))
    loan = Holding("the loan of move #12", window(-10, 5), frozenset({"h-3"}), lent=True)
    (conflict,) = booking_conflicts(asked, POOL, [loan])
    assert conflict.kind == LENT and conflict.moment == MONDAY
    assert "h-3 is lent by the loan of move #12 until 2027-01-04 13:00 UTC" in conflict.message


def test_the_floor_broken_at_some_moment_names_the_moment_and_the_others() -> None:
    asked = Holding("this booking", window(0, 48), frozenset({"h-0", "h-1"}))
    other = Holding("booking #7", window(30, 40), frozenset({"h-2"}))
    assert booking_conflicts(asked, POOL, [other]) == []  # 1 node left: the floor of 1 holds
    tight = PoolShape("inference", POOL.nodes, min_nodes=2)
    (conflict,) = booking_conflicts(asked, tight, [other])
    assert conflict.kind == FLOOR and conflict.moment == MONDAY + timedelta(hours=30)
    assert conflict.message == (
        "At 2027-01-05 14:00 UTC pool inference would keep 1 of its 4 nodes (with booking "
        "#7), under its minimum of 2."
    )


def test_a_count_of_gpus_counts_whole_nodes_and_the_gpus_left() -> None:
    asked = Holding("this booking", window(0, 24), gpu_model=H100, gpus=20)  # 3 nodes
    assert booking_conflicts(asked, POOL, []) == []
    other = Holding("booking #3", window(10, 20), frozenset({"h-0", "h-1"}))
    kinds = {c.kind: c for c in booking_conflicts(asked, POOL, [other])}
    assert set(kinds) == {FLOOR, CAPACITY}
    assert kinds[CAPACITY].message == (
        f"At 2027-01-04 18:00 UTC pool inference would have 16 {H100} GPUs left (with booking "
        "#3), fewer than the 20 asked."
    )


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"window": window(5, 1)}, "ends_at", "ends before it starts"),
        ({"window": window(-5, 1)}, "starts_at", "starts in the past"),
        ({"window": window(0, 24 * 91)}, "ends_at", "at most 90 days"),
        ({"destination": "inference"}, "destination", "another pool"),
        ({"nodes": (), "gpus": 0}, "nodes", "either nodes or a number of GPUs"),
        ({"gpus": 8, "gpu_model": H100}, "gpus", "either nodes"),
        ({"unknown_nodes": ("x-1",)}, "nodes", "Not nodes of pool inference: x-1"),
        ({"nodes": (), "gpus": 40, "gpu_model": H100}, "gpus", "has 32"),
        ({"nodes": (), "gpus": 8, "gpu_model": "L40S"}, "gpu_model", "has no L40S GPU"),
        ({"reason": " "}, "reason", "Say what"),
    ],
)
def test_each_bad_field_is_named(changes: dict[str, object], field: str, says: str) -> None:
    values: dict[str, object] = {
        "window": window(1, 24),
        "now": MONDAY,
        "source": "inference",
        "destination": "training",
        "nodes": ("h-0",),
        "reason": "evaluation run",
    }
    values.update(changes)
    problems = booking_problems(BookingAsked(**values), POOL)  # type: ignore[arg-type]
    assert field in problems and says in problems[field], problems


def test_a_count_takes_the_fewest_emptiest_nodes() -> None:
    candidates = [("a", 8, 4), ("b", 8, 0), ("c", 4, 0), ("d", 8, 0)]
    assert nodes_for_gpus(candidates, 12) == ["b", "d"]
    assert nodes_for_gpus(candidates, 30) is None
