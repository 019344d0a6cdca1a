"""A unified diff of two texts whose cost grows with their length, not its square (pure).

`difflib.unified_diff` compares the two texts as wholes: on a manifest of thousands of
near-identical lines (a Pod with 5,000 `nodeSelectorTerms`, each given the pool's requirement
by the fix) its matcher takes time that grows with the square of the length, and the fit
check runs it once per pool. Here:

1. the common head and tail are set aside (the fix leaves most of a manifest alone);
2. short middles go to difflib as before, so small manifests get exactly its diff;
3. longer ones are cut at the lines that occur once in each text, kept in order (patience
   diff's anchors: a changed term's unique value lines), and each stretch between two anchors
   goes to difflib when it is short, or is aligned greedily, looking a bounded number of
   lines ahead, when it is not (near-identical terms have no unique line to anchor on).

Every matcher therefore compares at most `SHORT_LINES` lines, and the result is a correct
unified diff: its context and removed lines are the old text, its context and added lines the
new one. Past the short case it may not be the smallest such diff.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence

SHORT_LINES = 400  # at most this many lines (both sides together) go to one difflib matcher
LOOKAHEAD = 64  # how far the greedy alignment looks for the line it lost
CONTEXT = 3

Opcode = tuple[str, int, int, int, int]


def unified_diff(before: str, after: str, old_name: str, new_name: str) -> str:
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    if len(old) + len(new) <= SHORT_LINES:
        return "".join(difflib.unified_diff(old, new, old_name, new_name))
    return "".join(_format(old, new, _merged(line_opcodes(old, new)), old_name, new_name))


def line_opcodes(old: Sequence[str], new: Sequence[str]) -> list[Opcode]:
    """difflib-style opcodes turning `old` into `new`, over the whole of both."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    codes: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    codes += _middle(old, new, head, len(old) - tail, head, len(new) - tail)
    if tail:
        codes.append(("equal", len(old) - tail, len(old), len(new) - tail, len(new)))
    return codes


def _middle(
    old: Sequence[str], new: Sequence[str], i1: int, i2: int, j1: int, j2: int
) -> list[Opcode]:
    codes: list[Opcode] = []
    # The stretches between anchors repeat (the same lines added to each of 4,000 terms, or to
    # each of 200 Deployments): each distinct one is matched once.
    seen: dict[tuple[tuple[str, ...], tuple[str, ...]], list[Opcode]] = {}
    for i, j in [*_anchors(old, new, i1, i2, j1, j2), (i2, j2)]:
        codes += _stretch_once(old, new, i1, i, j1, j, seen)
        if i < i2:
            codes.append(("equal", i, i + 1, j, j + 1))
        i1, j1 = i + 1, j + 1
    return codes


def _anchors(
    old: Sequence[str], new: Sequence[str], i1: int, i2: int, j1: int, j2: int
) -> list[tuple[int, int]]:
    """Lines found once in each side, as (old, new) positions, the longest run in order of both."""
    old_count = Counter(old[i1:i2])
    new_count = Counter(new[j1:j2])
    where = {new[j]: j for j in range(j1, j2) if new_count[new[j]] == 1}
    pairs = [
        (i, where[old[i]]) for i in range(i1, i2) if old_count[old[i]] == 1 and old[i] in where
    ]
    return _increasing(pairs)


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of `pairs` whose second items increase (patience sorting)."""
    tops: list[int] = []  # the second item ending the best run of each length
    ends: list[int] = []  # the index in `pairs` of that run's last pair
    previous = [-1] * len(pairs)
    for position, (_, j) in enumerate(pairs):
        length = bisect_left(tops, j)
        if length == len(tops):
            tops.append(j)
            ends.append(position)
        else:
            tops[length], ends[length] = j, position
        previous[position] = ends[length - 1] if length else -1
    run, position = [], ends[-1] if ends else -1
    while position >= 0:
        run.append(pairs[position])
        position = previous[position]
    return run[::-1]


def _stretch_once(
    old: Sequence[str],
    new: Sequence[str],
    i1: int,
    i2: int,
    j1: int,
    j2: int,
    seen: dict[tuple[tuple[str, ...], tuple[str, ...]], list[Opcode]],
) -> list[Opcode]:
    """`_stretch`, its opcodes (relative to the stretch) kept by the stretch's lines."""
    key = (tuple(old[i1:i2]), tuple(new[j1:j2]))
    if key not in seen:
        seen[key] = [
            (t, a1 - i1, a2 - i1, b1 - j1, b2 - j1)
            for t, a1, a2, b1, b2 in _stretch(old, new, i1, i2, j1, j2)
        ]
    return [(t, a1 + i1, a2 + i1, b1 + j1, b2 + j1) for t, a1, a2, b1, b2 in seen[key]]


def _stretch(
    old: Sequence[str], new: Sequence[str], i1: int, i2: int, j1: int, j2: int
) -> list[Opcode]:
    if i1 == i2 and j1 == j2:
        return []
    if i1 == i2:
        return [("insert", i1, i1, j1, j2)]
    if j1 == j2:
        return [("delete", i1, i2, j1, j1)]
    if (i2 - i1) + (j2 - j1) <= SHORT_LINES:
        matcher = difflib.SequenceMatcher(None, old[i1:i2], new[j1:j2], autojunk=False)
        return [
            (tag, a1 + i1, a2 + i1, b1 + j1, b2 + j1)
            for tag, a1, a2, b1, b2 in matcher.get_opcodes()
        ]
    return list(_greedy(old, new, i1, i2, j1, j2))


def _greedy(
    old: Sequence[str], new: Sequence[str], i: int, i2: int, j: int, j2: int
) -> Iterator[Opcode]:
    """Walk both sides together; where they differ, skip the fewest lines (at most LOOKAHEAD)
    on one side that bring them back in step, else replace one line by one."""
    while i < i2 and j < j2:
        if old[i] == new[j]:
            yield ("equal", i, i + 1, j, j + 1)
            i, j = i + 1, j + 1
            continue
        added = _distance(new, j, j2, old[i])
        removed = _distance(old, i, i2, new[j])
        if added is not None and (removed is None or added <= removed):
            yield ("insert", i, i, j, j + added)
            j += added
        elif removed is not None:
            yield ("delete", i, i + removed, j, j)
            i += removed
        else:
            yield ("replace", i, i + 1, j, j + 1)
            i, j = i + 1, j + 1
    yield from _stretch(old, new, i, i2, j, j2)


def _distance(lines: Sequence[str], start: int, end: int, wanted: str) -> int | None:
    for offset in range(1, min(LOOKAHEAD, end - start)):
        if lines[start + offset] == wanted:
            return offset
    return None


def _merged(codes: list[Opcode]) -> list[Opcode]:
    """Adjacent opcodes of one kind joined, and any run of changes made one replace, as
    difflib's own opcodes are (the grouping below relies on it)."""
    merged: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if i1 == i2 and j1 == j2:
            continue
        if merged and (merged[-1][0] == "equal") == (tag == "equal"):
            last = merged.pop()
            kind = "equal" if tag == "equal" else _change(i2 - last[1], j2 - last[3])
            merged.append((kind, last[1], i2, last[3], j2))
        else:
            merged.append((tag, i1, i2, j1, j2))
    return merged


def _change(removed: int, added: int) -> str:
    return "replace" if removed and added else "delete" if removed else "insert"


class _Known(difflib.SequenceMatcher[str]):
    """difflib's hunk grouping over opcodes computed here (it only calls get_opcodes)."""

    def __init__(self, codes: list[Opcode]) -> None:
        self._codes = codes

    def get_opcodes(self) -> list[Opcode]:
        return list(self._codes)


def _format(
    old: Sequence[str], new: Sequence[str], codes: list[Opcode], old_name: str, new_name: str
) -> Iterator[str]:
    """The lines difflib.unified_diff writes for these opcodes."""
    started = False
    for group in _Known(codes).get_grouped_opcodes(CONTEXT):
        if not started:
            started = True
            yield f"--- {old_name}\n"
            yield f"+++ {new_name}\n"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            # One string per hunk part: a generator's step per line was a third of the diff.
            if tag == "equal":
                yield "".join([" " + line for line in old[i1:i2]])
                continue
            yield "".join(["-" + line for line in old[i1:i2]])
            yield "".join(["+" + line for line in new[j1:j2]])


def _range(start: int, stop: int) -> str:
    """A hunk's range as difflib writes it: 1-based start, then the length unless it is 1."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + (1 if length else 0)},{length}"
