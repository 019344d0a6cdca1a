"""Pool colours (pure): a palette a new pool takes its colour from, and what a colour may be.

Each colour carries white text on a chip and stands apart from the grey of the unassigned
nodes (#7b8494) and from the health colours' red. A new pool takes the first colour no
other pool uses, so the pools on one page never share one until the palette runs out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PALETTE = (
    "#d9822b",  # orange
    "#2b7bd9",  # blue
    "#8a4fd1",  # purple
    "#2f9e6a",  # green
    "#b5468b",  # magenta
    "#1f8a99",  # teal
    "#a0701a",  # ochre
    "#5a62d6",  # indigo
    "#6b8e23",  # olive
    "#9b5c3b",  # brown
    "#c0508a",  # pink
    "#3d7a5e",  # pine
)
UNASSIGNED = "#7b8494"
_HEX = re.compile(r"#[0-9a-f]{6}")


def colour_pick(used: Iterable[str]) -> str:
    """The first palette colour no pool uses; when all are taken, the palette again, in
    turn (the n-th pool past the end takes colour n modulo its length)."""
    taken = [colour.lower() for colour in used]
    for colour in PALETTE:
        if colour not in taken:
            return colour
    return PALETTE[len(taken) % len(PALETTE)]


def colour_problem(colour: str) -> str | None:
    """Why `colour` cannot be a pool's colour (it lands in a style sheet), or None."""
    if not _HEX.fullmatch(colour):
        return "must be a colour written #rrggbb (lower-case hex digits)"
    if colour == UNASSIGNED:
        return "is the colour of the unassigned nodes"
    return None


def style_sheet(colours: Iterable[tuple[str, str]]) -> str:
    """CSS giving each pool's chip and card its colour, from (pool name, colour) pairs: a
    class per pool (`pool-colour-<name>`), so the pages need no inline style (the CSP
    refuses them). Pairs whose name or colour could break out of a rule are left out."""
    rules = [
        f".pool-colour-{name} {{ --pool-colour: {colour}; }}"
        for name, colour in colours
        if _CLASS_SAFE.fullmatch(name) and _HEX.fullmatch(colour)
    ]
    return "\n".join(rules) + "\n"


_CLASS_SAFE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
