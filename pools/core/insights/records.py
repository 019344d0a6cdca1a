"""The plain records the insights read: pods from the pod history, nodes from the inventory,
and the window they are read over (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

DAY = 86400.0
# The windows a page or the API may ask for, in days.
WINDOW_DAYS = (7, 30, 90)


class HistoryPod(NamedTuple):
    """One GPU pod of the history; times are epoch seconds (None: not reached).

    A tuple, not a dataclass: a 30-day window of a large pool holds 100,000 of them and
    building tuples from database rows is several times faster."""

    namespace: str
    name: str
    node: str
    pool: str  # the pool key's value on the node when the pod was bound
    phase: str
    gpus: int  # the GPU units it asks for: whole GPUs, MIG instances or shares
    cpu_milli: int
    memory_bytes: int
    team: str
    workload_type: str
    created: float
    scheduled: float | None
    started: float | None
    finished: float | None
    reason: str  # termination reason
    exit_code: int | None
    message: str  # termination message
    waiting_reason: str
    restarts: int
    # The gang it belongs to (namespace/kind/name of a Job-like owner whose pods start
    # together), '' when none or not read.
    gang: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def run_end(self) -> float | None:
        return self.finished


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def days(self) -> int:
        return round(self.seconds / DAY)

    def contains(self, at: float | None) -> bool:
        return at is not None and self.start <= at < self.end

    def clip(self, start: float, end: float | None) -> float:
        """Seconds of [start, end) inside the window (end None: still running)."""
        stop = self.end if end is None else min(end, self.end)
        return max(0.0, stop - max(start, self.start))


@dataclass(frozen=True)
class InsightNode:
    """A node as the inventory keeps it, with what the indicators compare."""

    name: str
    pool: str | None
    gpus: int  # allocatable
    gpu_model: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)
    driver: str = ""  # the exporter's driver label, '' when no series
    ready: bool = True
    cordoned: bool = False
    drifted: bool = False
    allocated: int = 0  # the GPU units its pods hold (whole GPUs, MIG instances, shares)
    gpus_reporting: int | None = None  # None: metrics unknown (Prometheus down)
    # GPUs reporting each counter the pages draw, by its name ("temperature", ...); None:
    # not read (gpus_reporting alone stands for them).
    counters_reporting: Mapping[str, int] | None = None
    # Capacity and allocatable (millicores, bytes); a capacity of 0: the node did not say.
    cpu_capacity: int = 0
    cpu_allocatable: int = 0
    memory_capacity: int = 0
    memory_allocatable: int = 0
    # The devices dcgm-exporter reports on (each GPU not in MIG mode, each MIG instance);
    # None: as many as `gpus` (a node of whole GPUs).
    devices: int | None = None
    # Its GPU units of every kind (MIG instances, shares, whole GPUs); None: as many as
    # `gpus` (a node of whole GPUs).
    units: int | None = None
    mig: bool = False  # some of its GPUs are split into MIG instances

    @property
    def reporting_devices(self) -> int:
        return self.gpus if self.devices is None else self.devices

    @property
    def unit_count(self) -> int:
        """What its pods can hold: the time their units are held is measured against it."""
        return self.gpus if self.units is None else self.units
