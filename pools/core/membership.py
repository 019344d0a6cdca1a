"""Which pool each node was in, and when (pure): a node's membership is a run of stays, each
a pool from one moment until the next, so a figure over a window can count every node in
the pool it was in at each moment rather than in today's.

A node's first stay begins when the portal first saw it there (or, for the time before the
portal kept stays, the earliest record of it): nothing says where the node was before. That
first stay is taken to reach back before its start, and the pages say from when the pools
are assumed rather than recorded (`assumed_before`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

# A span of a stay inside a window, in epoch seconds: None where it reaches past the
# window's start or end (the common case: a node in its pool all along is (None, None)).
Span = tuple[float | None, float | None]
ALL_ALONG: tuple[Span, ...] = ((None, None),)


@dataclass(frozen=True)
class Stay:
    """One node in one pool ('' : no pool) from `since` until `until` (None: still)."""

    node: str
    pool: str
    since: float
    until: float | None = None
    earliest: bool = False  # the node's first record: taken to hold before `since` too

    def reaches_back(self) -> float:
        return float("-inf") if self.earliest else self.since

    def reaches_on(self) -> float:
        return float("inf") if self.until is None else self.until


@dataclass(frozen=True)
class Change:
    """A node that joined or left a pool inside a window (None: before or after it)."""

    node: str
    joined: float | None
    left: float | None


class Membership:
    """Every node's stays, as recorded: who was in which pool at any moment of a window."""

    def __init__(self, stays: Iterable[Stay]) -> None:
        self.by_node: dict[str, list[Stay]] = defaultdict(list)
        self.by_pool: dict[str, list[Stay]] = defaultdict(list)
        for stay in sorted(stays, key=lambda s: (s.node, s.since)):
            self.by_node[stay.node].append(stay)
            self.by_pool[stay.pool].append(stay)

    def members(self, pool: str, start: float, end: float) -> dict[str, tuple[Span, ...]]:
        """The nodes in `pool` at some moment of [start, end), each with its spans there
        (None at a window edge the stay reaches past)."""
        found: dict[str, list[Span]] = defaultdict(list)
        for stay in self.by_pool.get(pool, ()):
            begins, ends = stay.reaches_back(), stay.reaches_on()
            if begins >= end or ends <= start:
                continue
            found[stay.node].append(
                (begins if begins > start else None, ends if ends < end else None)
            )
        return {node: _joined(spans) for node, spans in found.items()}

    def pool_at(self, node: str, at: float) -> str | None:
        """The node's pool at `at` ('' : none), or None when it was not there then."""
        for stay in self.by_node.get(node, ()):
            if stay.reaches_back() <= at < stay.reaches_on():
                return stay.pool
        return None

    def timeline(
        self, node: str, start: float
    ) -> tuple[str, list[tuple[float, str]], float | None]:
        """The node from `start` on: its pool then, each change of pool after (when, the
        pool joined), and when it went (None: still here). A node that went and came back
        is taken to have stayed in its pool meanwhile: a gap is rare and short, and a node
        that is away takes no pod."""
        stays = self.by_node.get(node, [])
        if not stays:
            return "", [], None
        current = next((s for s in reversed(stays) if s.reaches_back() <= start), stays[0])
        pool, changes = current.pool, []
        for stay in stays:
            if stay.since > start and stay.pool != pool:
                changes.append((stay.since, stay.pool))
                pool = stay.pool
        return current.pool, changes, stays[-1].until

    def changes(self, pool: str, start: float, end: float) -> list[Change]:
        """The nodes that joined or left `pool` inside [start, end), by name."""
        found = []
        for node, spans in sorted(self.members(pool, start, end).items()):
            for joined, left in spans:
                if joined is not None or left is not None:
                    found.append(Change(node, joined, left))
        return found

    def assumed_before(self, pool: str, start: float, end: float) -> float | None:
        """The latest moment before which some member's pool is assumed, not recorded (its
        first stay began inside the window), or None when every moment is recorded."""
        latest = None
        for stay in self.by_pool.get(pool, ()):
            if stay.earliest and start < stay.since < end:
                latest = stay.since if latest is None else max(latest, stay.since)
        return latest


def _joined(spans: list[Span]) -> tuple[Span, ...]:
    """Spans in order, two that touch (a node that left and came back at once) made one."""
    ordered = sorted(spans, key=lambda s: float("-inf") if s[0] is None else s[0])
    merged: list[Span] = []
    for begins, ends in ordered:
        if merged and merged[-1][1] is not None and begins is not None and begins <= merged[-1][1]:
            last_end = merged[-1][1]
            merged[-1] = (merged[-1][0], None if ends is None else max(ends, last_end))
        else:
            merged.append((begins, ends))
    return tuple(merged)


def all_along(names: Iterable[str]) -> dict[str, tuple[Span, ...]]:
    """Members for nodes known to be in the pool the whole window (no stays recorded)."""
    return {name: ALL_ALONG for name in names}
