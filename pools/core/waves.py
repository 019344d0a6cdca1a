"""Maintenance in waves, the pure part: how large a wave may be, what a request must say,
and when a wave's hold is over.

A maintenance takes N nodes of a pool through a driver or firmware upgrade: a wave of at most
K of them (or K % of the N, at least one) is cordoned and drained within the pool's headroom,
held until the upgrade is done, then uncordoned before the next wave starts. The hold ends when
an operator confirms the step, or when a node label says so on every node of the wave:
`key=value` waits for that value; a bare `key` waits for the label to appear or to change from
the value it had when the node was drained (GPU Feature Discovery's
`nvidia.com/cuda.driver.major` changes when a new driver is loaded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pools.core.names import label_key_problem, label_value_problem

MAX_WAVE_SIZE = 1000
MAX_DRAIN_DEADLINE_SECONDS = 24 * 3600
MIN_DRAIN_DEADLINE_SECONDS = 30
MAX_STEP_LENGTH = 200

CONFIRM = "confirm"
LABEL = "label"


def wave_limit(size: int, percent: bool, nodes: int) -> int:
    """The most nodes a wave takes: K, or K % of the maintenance's nodes rounded down (as a
    rolling update's maxUnavailable), but never 0: a maintenance must be able to go on."""
    if percent:
        return max(1, nodes * size // 100)
    return size


@dataclass(frozen=True)
class HoldLabel:
    key: str
    value: str | None  # None: the label appears, or changes from its value at the drain

    def __str__(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"

    def satisfied(self, before: str | None, now: str | None) -> bool:
        if self.value is not None:
            return now == self.value
        return now is not None and now != before


def parse_hold_label(text: str) -> HoldLabel:
    """`key` or `key=value`; ValueError saying why it is not a label."""
    key, sep, value = text.strip().partition("=")
    if not key:
        raise ValueError("name a node label: a key, or key=value")
    if problem := label_key_problem(key):
        raise ValueError(f"the key {key!r} {problem}")
    if sep and (problem := label_value_problem(value)):
        raise ValueError(f"the value {value!r} {problem}")
    return HoldLabel(key, value if sep else None)


@dataclass(frozen=True)
class WavesAsked:
    """What a maintenance request says, before it is recorded."""

    nodes_in_pool: int  # the pool's nodes present now
    nodes: int  # how many the maintenance takes
    wave_size: int
    wave_percent: bool
    hold: str  # CONFIRM or LABEL
    hold_label: str
    step: str
    drain_deadline_seconds: int
    counted: bool = False  # a count of nodes was asked, not names
    unknown_nodes: tuple[str, ...] = ()  # named but not nodes of the pool
    busy_nodes: Mapping[str, str] | None = None  # node -> what holds it (a move, a drill)


def waves_problems(asked: WavesAsked) -> dict[str, str]:
    """Each field at fault and why; empty when the maintenance may start."""
    problems: dict[str, str] = {}
    if asked.unknown_nodes:
        problems["nodes"] = f"Not nodes of the pool: {', '.join(asked.unknown_nodes)}."
    elif asked.busy_nodes:
        problems["nodes"] = " ".join(f"{n} {why}." for n, why in sorted(asked.busy_nodes.items()))
    elif asked.nodes <= 0:
        field = "count" if asked.counted else "nodes"
        problems[field] = "At least one node." if asked.counted else "The pool has no node."
    elif asked.nodes > asked.nodes_in_pool:
        problems["count"] = (
            f"The pool has {asked.nodes_in_pool} nodes: a maintenance cannot take {asked.nodes}."
        )
    if asked.wave_percent and not 1 <= asked.wave_size <= 100:
        problems["wave_size"] = "A wave in per cent is between 1 and 100."
    elif not asked.wave_percent and not 1 <= asked.wave_size <= MAX_WAVE_SIZE:
        problems["wave_size"] = f"A wave takes between 1 and {MAX_WAVE_SIZE} nodes."
    if asked.hold == LABEL:
        try:
            parse_hold_label(asked.hold_label)
        except ValueError as exc:
            problems["hold_label"] = f"The hold label: {exc}."
    elif asked.hold != CONFIRM:
        problems["hold"] = f"Hold until {CONFIRM!r} (an operator confirms) or {LABEL!r}."
    if asked.hold == CONFIRM and not asked.step.strip():
        problems["step"] = "Say what the operator confirms before a wave goes back, e.g. "
        problems["step"] += "'driver upgraded'."
    elif len(asked.step) > MAX_STEP_LENGTH:
        problems["step"] = f"At most {MAX_STEP_LENGTH} characters."
    if not MIN_DRAIN_DEADLINE_SECONDS <= asked.drain_deadline_seconds <= MAX_DRAIN_DEADLINE_SECONDS:
        problems["drain_deadline_seconds"] = (
            f"Between {MIN_DRAIN_DEADLINE_SECONDS} and {MAX_DRAIN_DEADLINE_SECONDS} seconds."
        )
    return problems
