"""The fix's diff: linear in the manifest's length, and a correct unified diff (issue 25, R1)."""

from __future__ import annotations

import difflib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pools.core.fit import text_diff
from pools.core.fit.cluster import FitPool
from pools.core.fit.fix import scheduling_fixes
from pools.core.fit.text_diff import SHORT_LINES, unified_diff
from pools.core.fit.workloads import read_manifest
from pools.core.taints import Taint

POOLS = [
    FitPool("training", {}, Taint("workload-training", "true")),
    FitPool("inference", {}, Taint("workload-inference", "true")),
    FitPool("mixed"),
]


def many_terms(terms: int, *, same: bool = False) -> str:
    """A Pod whose required node affinity has `terms` terms: the fix adds the pool to each."""
    lines = [
        "apiVersion: v1",
        "kind: Pod",
        "metadata: {name: big}",
        "spec:",
        "  affinity:",
        "    nodeAffinity:",
        "      requiredDuringSchedulingIgnoredDuringExecution:",
        "        nodeSelectorTerms:",
    ]
    for term in range(terms):
        zone = "zone-a" if same else f"zone-{term}"
        lines.append(f"        - matchExpressions: [{{key: zone, operator: In, values: [{zone}]}}]")
    lines += [
        "  containers:",
        "  - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 1}}}",
    ]
    return "\n".join(lines) + "\n"


class CountingMatcher(difflib.SequenceMatcher):  # type: ignore[type-arg]
    sizes: list[int] = []

    def __init__(self, isjunk=None, a="", b="", autojunk=True) -> None:  # type: ignore[no-untyped-def]
        super().__init__(isjunk, a, b, autojunk)
        CountingMatcher.sizes.append(len(a) + len(b))


@pytest.mark.parametrize("same", [False, True], ids=["distinct terms", "identical terms"])
def test_no_matcher_compares_more_than_a_short_stretch_of_a_big_manifest(monkeypatch, same):  # type: ignore[no-untyped-def]
    # difflib's matcher takes time growing with the square of what it compares; the fix ran
    # it over the whole manifest once per pool (9 s for 1,000 terms, 295 s for 5,000).
    monkeypatch.setattr(difflib, "SequenceMatcher", CountingMatcher)
    CountingMatcher.sizes = []
    manifest = read_manifest(many_terms(3000, same=same))
    fixes = scheduling_fixes(manifest, POOLS, "gpu-pool")
    lines = sum(len(f.text.splitlines()) for f in fixes.values())
    assert max(CountingMatcher.sizes, default=0) <= SHORT_LINES
    assert sum(CountingMatcher.sizes) <= 3 * lines
    for fix in fixes.values():
        assert fix.diff.count("\n+") >= 3000  # every term got the pool


def apply(old: list[str], diff: str) -> tuple[list[str], list[str]]:
    """Both sides rebuilt from `old` and the diff, checking every context and removed line."""
    rebuilt_old: list[str] = []
    new: list[str] = []
    position = 0
    for line in diff.splitlines(keepends=True)[2:]:
        if hunk := re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", line):
            start = int(hunk[1]) - (0 if hunk[2] == "0" else 1)
            rebuilt_old += old[position:start]
            new += old[position:start]
            position = start
            continue
        sign, text = line[0], line[1:]
        if sign in " -":
            assert old[position] == text
            rebuilt_old.append(text)
            position += 1
        if sign in " +":
            new.append(text)
    rebuilt_old += old[position:]
    new += old[position:]
    return rebuilt_old, new


LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "- key: x\n", "  x\n"]), max_size=60)


@given(old=LINES, new=LINES, extra=st.lists(st.integers(0, 10_000), max_size=5))
def test_the_long_path_gives_a_diff_that_turns_the_old_text_into_the_new(old, new, extra):  # type: ignore[no-untyped-def]
    # Unique lines (anchors) sprinkled into both sides; the short limit lowered so that each
    # branch of the long path (anchors, short stretches, greedy alignment) runs.
    for value in extra:
        line = f"unique {value}\n"
        if line not in old:
            old.insert(value % (len(old) + 1), line)
            new.insert(value % (len(new) + 1), line)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_diff, "SHORT_LINES", 6)
        patch.setattr(text_diff, "LOOKAHEAD", 4)
        diff = unified_diff("".join(old), "".join(new), "old", "new")
    if old == new:
        assert diff == ""
        return
    assert diff.startswith("--- old\n+++ new\n")
    assert apply(old, diff) == (old, new)


def test_a_short_text_gets_difflibs_own_diff() -> None:
    old = [f"line {n}\n" for n in range(100)]
    new = [*old[:40], "added\n", *old[40:90], *old[95:]]
    expected = "".join(difflib.unified_diff(old, new, "a", "b"))
    assert unified_diff("".join(old), "".join(new), "a", "b") == expected
