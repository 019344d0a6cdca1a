"""Pool colours (pools/core/palette.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pools.core.palette import PALETTE, UNASSIGNED, colour_pick, colour_problem, style_sheet


def test_a_new_pool_takes_the_first_free_colour_never_the_unassigned_grey() -> None:
    assert colour_pick([]) == PALETTE[0]
    assert colour_pick([PALETTE[0], PALETTE[1].upper()]) == PALETTE[2]
    assert UNASSIGNED not in PALETTE


@given(st.lists(st.sampled_from(PALETTE), unique=True))
def test_free_colours_are_taken_before_any_is_shared(used: list[str]) -> None:
    picked = colour_pick(used)
    assert picked in PALETTE
    assert (picked not in used) == (len(used) < len(PALETTE))


def test_colours_are_checked_before_they_reach_a_style_sheet() -> None:
    assert colour_problem("#1f8a99") is None
    assert colour_problem("red") and colour_problem("#ABCDEF") and colour_problem(UNASSIGNED)
    css = style_sheet([("training", "#d9822b"), ("x}body{", "#000000"), ("ok", "#00;}")])
    assert css == ".pool-colour-training { --pool-colour: #d9822b; }\n"
