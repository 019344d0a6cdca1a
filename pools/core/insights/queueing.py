"""Queue time (pure): how long GPU pods waited from creation to being scheduled, and why.

A pod that waited while a node outside its pool had room for it waited because its node
selection was restricted (a taint or an affinity kept it off that node): the pool's size or
the scheduling rules need adjusting. A pod that waited while no pool had room waited for
plain shortage. The room is read from the pod history: the GPUs each node's bound pods held
at the moment the pod was created, against the node's allocatable GPUs today."""

from __future__ import annotations

import enum
import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pools.core.insights.records import NodeFacts, PodRecord, Window
from pools.core.insights.stats import Spread, spread

# A pod scheduled within this many seconds did not queue (binding takes a moment).
QUEUED_AFTER_SECONDS = 60.0


class QueueCause(enum.StrEnum):
    RESTRICTED = "restricted"  # another pool had room: taints or affinity kept it out
    SHORTAGE = "shortage"  # no pool had room
    OWN_POOL_ROOM = "own_pool_room"  # its own pool had room (gang, fragmentation, a slow bind)


QUEUE_CAUSE_TITLES = {
    QueueCause.RESTRICTED: "node selection restricted (another pool had room)",
    QueueCause.SHORTAGE: "plain shortage (no pool had room)",
    QueueCause.OWN_POOL_ROOM: "its own pool had room (gang, fragmentation or a slow bind)",
}


@dataclass(frozen=True)
class QueueReport:
    waits: Spread = field(default_factory=Spread)  # every GPU pod created in the window
    queued: int = 0  # of which waited longer than QUEUED_AFTER_SECONDS
    still_pending: int = 0
    by_cause: Mapping[QueueCause, Spread] = field(default_factory=dict)
    # Queued pods in the first and the second half of the window: is the queue growing?
    first_half: int = 0
    second_half: int = 0
    peak_waiting_gpus: int = 0  # most GPUs asked by queued pods at once

    @property
    def growing(self) -> bool:
        return self.second_half > self.first_half

    def count(self, cause: QueueCause) -> int:
        spread_ = self.by_cause.get(cause)
        return spread_.count if spread_ else 0


class _Room:
    """Free GPUs of every schedulable node, as pods bind and end, counted per pool by the
    number free so "does pool P have a node with g free" costs a few lookups."""

    def __init__(self, nodes: Sequence[NodeFacts]) -> None:
        self.capacity = {n.name: n.gpus for n in nodes if n.ready and not n.cordoned}
        self.pool = {n.name: n.pool or "" for n in nodes}
        self.held: dict[str, int] = defaultdict(int)
        self.free_counts: dict[str, Counter[int]] = defaultdict(Counter)
        for name, gpus in self.capacity.items():
            self.free_counts[self.pool[name]][gpus] += 1

    def change(self, node: str, gpus: int) -> None:
        if node not in self.capacity:
            return
        counts = self.free_counts[self.pool[node]]
        before = max(0, self.capacity[node] - self.held[node])
        self.held[node] += gpus
        after = max(0, self.capacity[node] - self.held[node])
        counts[before] -= 1
        counts[after] += 1

    def has_room(self, gpus: int, *, inside: str | None, outside: str | None) -> bool:
        for pool, counts in self.free_counts.items():
            if (inside is not None and pool != inside) or (outside is not None and pool == outside):
                continue
            if pool == "" and outside is not None:
                continue  # unassigned nodes carry no pool's labels: no pod is steered there
            if any(n > 0 and free >= gpus for free, n in counts.items()):
                return True
        return False


def _bindings(pods: Iterable[PodRecord]) -> list[tuple[float, int, str]]:
    """(time, GPUs held from then on, node) for every bind and every end, in time order."""
    events = []
    for pod in pods:
        if pod.scheduled is None or not pod.node or not pod.gpus:
            continue
        events.append((pod.scheduled, pod.gpus, pod.node))
        if pod.finished is not None:
            events.append((pod.finished, -pod.gpus, pod.node))
    events.sort()
    return events


def _peak(intervals: list[tuple[float, float, int]]) -> int:
    """The most GPUs waiting at once over (start, end, gpus) intervals."""
    current = peak = 0
    ends: list[tuple[float, int]] = []
    for start, end, gpus in sorted(intervals):
        while ends and ends[0][0] <= start:
            current -= heapq.heappop(ends)[1]
        current += gpus
        heapq.heappush(ends, (end, gpus))
        peak = max(peak, current)
    return peak


def queue_report(
    pods: Sequence[PodRecord], nodes: Sequence[NodeFacts], pool: str, window: Window
) -> QueueReport:
    """Queue times of the GPU pods of `pool` created in the window. `pods` is the whole
    cluster's history over the window (other pools' pods say when those pools had room);
    a pod's pool is where it was bound, or for a pending pod the pool it asks for."""
    mine = sorted(
        (p for p in pods if p.pool == pool and p.gpus and window.contains(p.created)),
        key=lambda p: p.created,
    )
    room, events, e = _Room(nodes), _bindings(pods), 0
    waits: list[float] = []
    by_cause: dict[QueueCause, list[float]] = {c: [] for c in QueueCause}
    halves, waiting, pending = [0, 0], [], 0
    middle = window.start + window.seconds / 2
    for pod in mine:
        while e < len(events) and events[e][0] <= pod.created:
            room.change(events[e][2], events[e][1])
            e += 1
        end = pod.scheduled if pod.scheduled is not None else (pod.finished or window.end)
        pending += pod.scheduled is None and pod.finished is None
        wait = max(0.0, end - pod.created)
        waits.append(wait)
        if wait < QUEUED_AFTER_SECONDS:
            continue
        halves[pod.created >= middle] += 1
        waiting.append((pod.created, end, pod.gpus))
        if room.has_room(pod.gpus, inside=pool, outside=None):
            cause = QueueCause.OWN_POOL_ROOM
        elif room.has_room(pod.gpus, inside=None, outside=pool):
            cause = QueueCause.RESTRICTED
        else:
            cause = QueueCause.SHORTAGE
        by_cause[cause].append(wait)
    return QueueReport(
        waits=spread(waits),
        queued=sum(halves),
        still_pending=pending,
        by_cause={c: spread(v) for c, v in by_cause.items()},
        first_half=halves[0],
        second_half=halves[1],
        peak_waiting_gpus=_peak(waiting),
    )
