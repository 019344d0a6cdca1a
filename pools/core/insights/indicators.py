"""A pool's four indicators together, over one window (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pools.core.insights.failures import FailureReport
from pools.core.insights.queueing import QueueReport
from pools.core.insights.records import Window
from pools.core.insights.replacement import ReplacementReport
from pools.core.insights.utilisation import UtilisationReport
from pools.core.membership import Change


@dataclass(frozen=True)
class InsightPool:
    """What the advisor needs of a pool besides its indicators."""

    name: str
    dedicated: bool  # its nodes carry a NoSchedule taint
    nodes: int
    gpus_per_node: int  # the most common allocatable count
    min_nodes: int = 0
    accepted_models: tuple[str, ...] = ()  # empty: any
    # Nodes that could be lent now: ready, schedulable, no GPU pod, no active move; with
    # their GPU model.
    lendable: Sequence[tuple[str, str]] = field(default_factory=tuple)
    # Every node that could move now (ready, schedulable, no active move), whatever runs
    # there: (name, GPU model, allocatable GPU units, units allocated; a unit is a whole
    # GPU, a MIG instance or a share). A NotReady node is never among them: down, not idle.
    candidates: Sequence[tuple[str, str, int, int]] = field(default_factory=tuple)

    @property
    def free_now(self) -> int:
        """GPU units free now on the nodes that could move, whole nodes and pieces together."""
        return sum(max(0, gpus - allocated) for _, _, gpus, allocated in self.candidates)

    def accepts(self, model: str) -> bool:
        return not self.accepted_models or model in self.accepted_models


@dataclass(frozen=True)
class WindowMembers:
    """Who the pool's figures over the window count: every node that was in it, those that
    joined or left inside it (with when), and the moment before which some node's pool is
    assumed from its earliest record rather than recorded (None: all recorded)."""

    nodes: int = 0
    changes: Sequence[Change] = ()
    assumed_before: float | None = None


@dataclass(frozen=True)
class PoolInsights:
    pool: InsightPool
    window: Window
    utilisation: UtilisationReport
    queue: QueueReport
    failures: FailureReport
    replacement: ReplacementReport
    members: WindowMembers = field(default_factory=WindowMembers)
