"""Bookings, the pure part: what a booking asks, what it must say, and what it conflicts
with over its window.

A booking takes nodes of a pool for a team over a window in the future: named nodes, or a
number of GPUs of a model (whole nodes are chosen at its start, the fewest that hold them).
It conflicts with what else holds the pool's nodes at some moment of its window:

- another booking of the same nodes (approved, or started as a loan);
- a loan that has the node lent then (a move with an end, not returned by the start);
- the pool's floor (`min_nodes`) broken at some moment, counting every booking and loan
  that overlaps at that moment;
- for a count of GPUs, too few GPUs of the model left at some moment.

Each conflict names what it overlaps and the moment. The pool is taken as it is now (its
nodes, its floor): a node added or retired later changes the answer, and the check runs again
when the booking is approved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

MAX_WINDOW = timedelta(days=90)
MAX_AHEAD = timedelta(days=366)
NODES = "nodes"  # a conflict over the same nodes
LENT = "lent"  # a node is lent by a loan then
FLOOR = "floor"  # the pool's minimum broken
CAPACITY = "capacity"  # too few GPUs of the model


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    def overlaps(self, other: Window) -> bool:
        return self.start < other.end and other.start < self.end

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


@dataclass(frozen=True)
class Holding:
    """Something that holds some of the pool's nodes over a window: a booking, or a loan."""

    name: str  # "booking #7", "loan (move #12)"
    window: Window
    nodes: frozenset[str] = frozenset()  # named nodes
    gpu_model: str = ""  # or a number of GPUs of a model
    gpus: int = 0
    lent: bool = False  # a loan, not a booking


@dataclass(frozen=True)
class PoolShape:
    """The pool as it is now: each node's GPU model and count, and its floor."""

    name: str
    nodes: Mapping[str, tuple[str, int]]  # node -> (GPU model, GPUs)
    min_nodes: int = 0

    def gpus_per_node(self, model: str) -> int:
        counts = [gpus for m, gpus in self.nodes.values() if m == model and gpus]
        return max(counts) if counts else 0

    def nodes_for(self, model: str, gpus: int) -> int:
        """The whole nodes a count of GPUs of `model` takes."""
        per_node = self.gpus_per_node(model)
        return math.ceil(gpus / per_node) if per_node else 0


@dataclass(frozen=True)
class Conflict:
    kind: str  # NODES, LENT, FLOOR or CAPACITY
    message: str
    moment: datetime
    with_: tuple[str, ...] = field(default=())  # the holdings it overlaps

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "message": self.message,
            "moment": self.moment.isoformat(),
            "with": list(self.with_),
        }


def _at(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def booking_conflicts(asked: Holding, pool: PoolShape, others: Sequence[Holding]) -> list[Conflict]:
    """What `asked` conflicts with, by the moment it starts to."""
    overlapping = [h for h in others if h.window.overlaps(asked.window)]
    conflicts = []
    for other in overlapping:
        shared = sorted(asked.nodes & other.nodes)
        if not shared:
            continue
        moment = max(asked.window.start, other.window.start)
        verb = "is lent by" if other.lent else "is booked by"
        until = f" until {_at(other.window.end)}"
        conflicts.append(
            Conflict(
                LENT if other.lent else NODES,
                f"{', '.join(shared)} {verb} {other.name}{until}, from {_at(moment)}.",
                moment,
                (other.name,),
            )
        )
    for moment in _moments(asked.window, overlapping):
        there = [h for h in overlapping if h.window.holds(moment)]
        conflicts += _shortages(asked, pool, there, moment)
    found: dict[tuple[str, tuple[str, ...]], Conflict] = {}
    for conflict in sorted(conflicts, key=lambda c: c.moment):
        found.setdefault((conflict.kind, conflict.with_), conflict)
    return list(found.values())


def _moments(window: Window, overlapping: Sequence[Holding]) -> list[datetime]:
    """Where the count of nodes held can change inside the window: its start, and each
    overlapping holding's start within it."""
    starts = {window.start} | {h.window.start for h in overlapping if window.holds(h.window.start)}
    return sorted(starts)


def _shortages(
    asked: Holding, pool: PoolShape, there: Sequence[Holding], moment: datetime
) -> list[Conflict]:
    named = set(asked.nodes).union(*(h.nodes for h in there)) & set(pool.nodes)
    counted = [h for h in [asked, *there] if h.gpus]
    away = len(named) + sum(pool.nodes_for(h.gpu_model, h.gpus) for h in counted)
    left = len(pool.nodes) - away
    names = tuple(h.name for h in there)
    besides = f" (with {', '.join(names)})" if names else ""
    conflicts = []
    if left < pool.min_nodes:
        conflicts.append(
            Conflict(
                FLOOR,
                f"At {_at(moment)} pool {pool.name} would keep {max(left, 0)} of its "
                f"{len(pool.nodes)} nodes{besides}, under its minimum of {pool.min_nodes}.",
                moment,
                names,
            )
        )
    if asked.gpus:
        free = sum(
            gpus
            for node, (m, gpus) in pool.nodes.items()
            if m == asked.gpu_model and node not in named
        ) - sum(h.gpus for h in there if h.gpu_model == asked.gpu_model)
        if free < asked.gpus:
            conflicts.append(
                Conflict(
                    CAPACITY,
                    f"At {_at(moment)} pool {pool.name} would have {max(free, 0)} "
                    f"{asked.gpu_model} GPUs left{besides}, fewer than the {asked.gpus} asked.",
                    moment,
                    names,
                )
            )
    return conflicts


@dataclass(frozen=True)
class BookingAsked:
    """What a booking request says, before it is recorded; `now` is given, never read."""

    window: Window
    now: datetime
    source: str
    destination: str
    nodes: tuple[str, ...] = ()
    gpu_model: str = ""
    gpus: int = 0
    unknown_nodes: tuple[str, ...] = ()  # named, not nodes of the pool
    reason: str = ""


def booking_problems(asked: BookingAsked, pool: PoolShape) -> dict[str, str]:
    """Each field at fault and why (a 400); empty when the booking may be asked for."""
    problems: dict[str, str] = {}
    window = asked.window
    if window.end <= window.start:
        problems["ends_at"] = "The window ends before it starts."
    elif window.start < asked.now:
        problems["starts_at"] = f"The window starts in the past ({_at(window.start)})."
    elif window.end - window.start > MAX_WINDOW:
        problems["ends_at"] = f"A booking lasts at most {MAX_WINDOW.days} days."
    elif window.start - asked.now > MAX_AHEAD:
        problems["starts_at"] = f"A booking starts within {MAX_AHEAD.days} days."
    if asked.destination == asked.source:
        problems["destination"] = "The nodes are booked into another pool than their own."
    problems.update(_what_problems(asked, pool))
    if not asked.reason.strip():
        problems["reason"] = "Say what the booking is for."
    return problems


def _what_problems(asked: BookingAsked, pool: PoolShape) -> dict[str, str]:
    if bool(asked.nodes) == bool(asked.gpus):
        both = "Book either nodes or a number of GPUs of a model."
        return {"nodes": both, "gpus": both}
    if asked.unknown_nodes:
        return {"nodes": f"Not nodes of pool {pool.name}: {', '.join(asked.unknown_nodes)}."}
    if asked.nodes and len(asked.nodes) > len(pool.nodes):
        return {"nodes": f"Pool {pool.name} has {len(pool.nodes)} nodes."}
    if not asked.gpus:
        return {}
    if asked.gpus < 0:
        return {"gpus": "A number of GPUs, at least 1."}
    held = sum(gpus for m, gpus in pool.nodes.values() if m == asked.gpu_model)
    if not held:
        models = sorted({m for m, _ in pool.nodes.values() if m})
        return {
            "gpu_model": f"Pool {pool.name} has no {asked.gpu_model or 'such'} GPU "
            f"(it has {', '.join(models) or 'none'})."
        }
    if asked.gpus > held:
        return {
            "gpus": f"Pool {pool.name} has {held} {asked.gpu_model} GPUs: "
            f"a booking cannot take {asked.gpus}."
        }
    return {}


def nodes_for_gpus(candidates: Sequence[tuple[str, int, int]], gpus: int) -> list[str] | None:
    """The fewest whole nodes holding `gpus` GPUs, from (node, GPUs, GPUs allocated): the
    emptiest first (their pods have least to lose), the larger first among equals. None when
    they cannot."""
    chosen, total = [], 0
    for node, count, _ in sorted(candidates, key=lambda c: (c[2], -c[1], c[0])):
        if total >= gpus:
            break
        chosen.append(node)
        total += count
    return chosen if total >= gpus else None
