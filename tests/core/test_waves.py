"""Maintenance in waves, the pure part: a wave's size, a hold label, and what a request
must say (each refusal names its field)."""

from __future__ import annotations

import pytest

from pools.core.headroom import Budget, HeadroomNode, HeadroomPod, headroom
from pools.core.waves import (
    CONFIRM,
    LABEL,
    HoldLabel,
    WavesAsked,
    parse_hold_label,
    wave_limit,
    waves_problems,
)


@pytest.mark.parametrize(
    ("size", "percent", "nodes", "expected"),
    [(3, False, 10, 3), (25, True, 10, 2), (10, True, 4, 1), (100, True, 7, 7), (1, True, 1, 1)],
)
def test_a_wave_is_k_nodes_or_k_per_cent_rounded_down_but_never_none(
    size: int, percent: bool, nodes: int, expected: int
) -> None:
    assert wave_limit(size, percent, nodes) == expected


def test_a_hold_label_with_a_value_waits_for_that_value() -> None:
    hold = parse_hold_label("nvidia.com/cuda.driver.major=570")
    assert hold == HoldLabel("nvidia.com/cuda.driver.major", "570")
    assert not hold.satisfied(before="550", now="550")
    assert not hold.satisfied(before="550", now=None)
    assert hold.satisfied(before="550", now="570")


def test_a_bare_key_waits_for_the_label_to_appear_or_change() -> None:
    hold = parse_hold_label("nvidia.com/cuda.driver.major")
    assert hold.value is None and str(hold) == "nvidia.com/cuda.driver.major"
    assert not hold.satisfied(before="550", now="550")  # already there: not a sign of the step
    assert hold.satisfied(before="550", now="570")
    assert hold.satisfied(before=None, now="570")
    assert not hold.satisfied(before=None, now=None)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "name a node label"),
        ("=570", "name a node label"),
        ("bad key!", "the key 'bad key!'"),
        ("a/b/c", "at most one '/'"),
        ("upgraded=not ok", "the value 'not ok'"),
    ],
)
def test_a_hold_label_that_is_no_label_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_hold_label(text)


def asked(**changes: object) -> WavesAsked:
    values: dict[str, object] = {
        "nodes_in_pool": 6,
        "nodes": 6,
        "wave_size": 2,
        "wave_percent": False,
        "hold": CONFIRM,
        "hold_label": "",
        "step": "driver upgraded",
        "drain_deadline_seconds": 1800,
    }
    values.update(changes)
    return WavesAsked(**values)  # type: ignore[arg-type]


def test_a_sound_request_has_no_problem() -> None:
    assert waves_problems(asked()) == {}
    assert waves_problems(asked(hold=LABEL, hold_label="example.com/fw=2.1", step="")) == {}
    assert waves_problems(asked(wave_size=50, wave_percent=True)) == {}


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"wave_size": 0}, "wave_size", "between 1 and 1000 nodes"),
        ({"wave_size": 101, "wave_percent": True}, "wave_size", "between 1 and 100"),
        ({"wave_size": 0, "wave_percent": True}, "wave_size", "between 1 and 100"),
        ({"nodes": 7, "counted": True}, "count", "The pool has 6 nodes"),
        ({"nodes": 0, "counted": True}, "count", "At least one node"),
        ({"nodes": 0, "nodes_in_pool": 0}, "nodes", "The pool has no node"),
        ({"unknown_nodes": ("gpu-x",)}, "nodes", "Not nodes of the pool: gpu-x"),
        ({"busy_nodes": {"gpu-1": "is in drill #4"}}, "nodes", "gpu-1 is in drill #4"),
        ({"hold": LABEL, "hold_label": ""}, "hold_label", "name a node label"),
        ({"hold": "whenever"}, "hold", "'confirm'"),
        ({"step": "  "}, "step", "Say what the operator confirms"),
        ({"drain_deadline_seconds": 5}, "drain_deadline_seconds", "Between 30 and 86400"),
    ],
)
def test_each_bad_field_is_named(changes: dict[str, object], field: str, says: str) -> None:
    problems = waves_problems(asked(**changes))
    assert field in problems and says in problems[field]


def test_headroom_of_some_nodes_alone_still_counts_the_others_for_the_floor_and_budgets() -> None:
    nodes = [HeadroomNode(n) for n in ("a", "b", "c", "d")]
    pods = [HeadroomPod("ns", f"p-{n}", n, {"app": "x"}) for n in ("a", "b", "c")]
    budget = Budget("ns", "x", {"matchLabels": {"app": "x"}}, disruptions_allowed=1)
    everything = headroom("pool", nodes, pods, [budget], min_nodes=1)
    assert everything.drainable == ("d", "a")  # pod-free first, then one budgeted node
    some = headroom("pool", nodes, pods, [budget], min_nodes=1, only={"b", "c"})
    assert some.drainable == ("b",)  # one budget disruption, and never a node outside
    assert headroom("pool", nodes, pods, [budget], min_nodes=4, only={"d"}).drainable == ()
