"""Queue time (pure): how long GPU pods waited from creation to being scheduled, and why.

A pod that waited while a node outside its pool had room for it waited because its node
selection was restricted (a taint or an affinity kept it off that node): the pool's size or
the scheduling rules need adjusting. A pod that waited while no pool had room waited for
plain shortage. The room is read as the cluster was when the pod waited: the GPUs each
node's bound pods held then, on the nodes that existed then (a node since gone counts until
it went), in the pool each was in then (moves since are undone), against their allocatable
GPUs. Whether a node was cordoned or not ready then is not recorded: today's state says
nothing about last week, so every node counts as schedulable."""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pools.core.insights.records import HistoryPod, Window
from pools.core.insights.stats import Spread, spread

# A pod scheduled within this many seconds did not queue (binding takes a moment).
QUEUED_AFTER_SECONDS = 60.0
# Owners whose pods start together (a training job's workers): they wait as one.
GANG_OWNERS = frozenset({"Job", "PyTorchJob", "MPIJob", "JobSet", "RayCluster", "TFJob"})
# Pods of one gang created this close to its first are one wave of it (a retry later is
# another).
GANG_WAVE_SECONDS = 60.0


class QueueCause(enum.StrEnum):
    RESTRICTED = "restricted"  # another pool had a node with room: taints or affinity kept it out
    FRAGMENTED = "fragmented"  # its pool had the GPUs free in all, but no node had them
    UNASSIGNED = "unassigned"  # only nodes in no pool had room
    SHORTAGE = "shortage"  # no node anywhere had room, nor its pool the GPUs in all
    OWN_POOL_ROOM = "own_pool_room"  # its own pool had room for it (for all of its gang)


QUEUE_CAUSE_TITLES = {
    QueueCause.RESTRICTED: "node selection restricted (another pool had room)",
    QueueCause.FRAGMENTED: "fragmentation (the pool had the GPUs, no single node had room)",
    QueueCause.UNASSIGNED: "unassigned nodes had room (no pool holds them)",
    QueueCause.SHORTAGE: "plain shortage (no pool had room)",
    QueueCause.OWN_POOL_ROOM: "its own pool had room (a slow bind, a scheduling gate)",
}


@dataclass(frozen=True)
class QueueReport:
    waits: Spread = field(default_factory=Spread)  # every GPU pod created in the window
    queued: int = 0  # of which waited longer than QUEUED_AFTER_SECONDS
    still_pending: int = 0
    by_cause: Mapping[QueueCause, Spread] = field(default_factory=dict)
    # Queued pods in the first and the second half of the window's history (from its first
    # pod on): is the queue growing?
    first_half: int = 0
    second_half: int = 0
    peak_waiting_gpus: int = 0  # most GPUs asked by queued pods at once

    @property
    def growing(self) -> bool:
        return self.second_half > self.first_half

    def count(self, cause: QueueCause) -> int:
        spread_ = self.by_cause.get(cause)
        return spread_.count if spread_ else 0


@dataclass(frozen=True)
class NodeMembership:
    """A node as it was over the window: its pool at the window's start, when it moved to
    another pool since (time, pool; None: unassigned), when it went (None: still here)."""

    name: str
    gpus: int
    pool: str | None
    moves: tuple[tuple[float, str | None], ...] = ()
    gone_at: float | None = None


GONE = -1  # the pool index of a node that went


class _Room:
    """Free GPUs of every node, as pods bind and end and nodes move or go, counted per pool
    by the number free so "does pool P have a node with g free" costs a few lookups. Nodes
    and pools are list indices: the sweep changes it once per bind and once per end, 200,000
    times for 100,000 pods."""

    def __init__(self, nodes: Sequence[NodeMembership]) -> None:
        pools = {n.pool or "" for n in nodes} | {p or "" for n in nodes for _, p in n.moves}
        self.pools = sorted(pools)
        self.pool_index = {p: i for i, p in enumerate(self.pools)}
        self.index = {n.name: i for i, n in enumerate(nodes)}
        self.capacity = [n.gpus for n in nodes]
        self.free = list(self.capacity)  # may go below zero: a history is not always tidy
        self.pool_of = [self.pool_index[n.pool or ""] for n in nodes]
        top = max(self.capacity, default=0)
        self.counts = [[0] * (top + 1) for _ in self.pools]
        self.totals = [0] * len(self.pools)  # free GPUs of each pool, every node together
        for i, gpus in enumerate(self.capacity):
            self.counts[self.pool_of[i]][gpus] += 1
            self.totals[self.pool_of[i]] += gpus

    def apply(self, events: list[tuple[float, int, int]], start: int, until: float) -> int:
        """Apply the events from `start` up to time `until`; the index of the next one. An
        event is (time, GPUs taken, node), or (time, MOVE_BASE + pool index or GONE, node)
        for a node that changed pool or went."""
        free, counts, pool_of = self.free, self.counts, self.pool_of
        i, n = start, len(events)
        while i < n and events[i][0] <= until:
            _, gpus, node = events[i]
            i += 1
            if gpus >= MOVE_BASE:
                self._move(node, gpus - MOVE_BASE)
                continue
            before = free[node]
            after = before - gpus
            free[node] = after
            if pool_of[node] == GONE:
                continue
            row = counts[pool_of[node]]
            row[before if before > 0 else 0] -= 1
            row[after if after > 0 else 0] += 1
            self.totals[pool_of[node]] += max(after, 0) - max(before, 0)
        return i

    def _move(self, node: int, pool: int) -> None:
        free = max(self.free[node], 0)
        if self.pool_of[node] != GONE:
            self.counts[self.pool_of[node]][free] -= 1
            self.totals[self.pool_of[node]] -= free
        self.pool_of[node] = pool
        if pool != GONE:
            self.counts[pool][free] += 1
            self.totals[pool] += free

    def total_free(self, pool: str) -> int:
        """The GPUs free on the pool's nodes together, whether or not one node has them."""
        index = self.pool_index.get(pool)
        return self.totals[index] if index is not None else 0

    def has_room(
        self, gpus: int, *, inside: str | None, outside: str | None, pods: int = 1
    ) -> bool:
        """Whether one pool (`inside`, or any but `outside`) can place `pods` pods of
        `gpus` GPUs each at once, on its nodes' free GPUs (a gang lands in one pool)."""
        need = max(gpus, 1)
        for pool, row in zip(self.pools, self.counts, strict=True):
            if (inside is not None and pool != inside) or (outside is not None and pool == outside):
                continue
            if pool == "" and outside is not None:
                continue  # unassigned nodes carry no pool's labels: no pod is steered there
            placed = 0
            for free in range(need, len(row)):
                placed += row[free] * (free // need)
                if placed >= pods:
                    return True
        return False


# Node events sort after pod events at the same second: (time, MOVE_BASE + pool, node).
MOVE_BASE = 1 << 30


def _node_events(nodes: Sequence[NodeMembership], room: _Room) -> list[tuple[float, int, int]]:
    events = []
    for i, node in enumerate(nodes):
        for at, pool in node.moves:
            events.append((at, MOVE_BASE + room.pool_index[pool or ""], i))
        if node.gone_at is not None:
            events.append((node.gone_at, MOVE_BASE + GONE, i))
    return events


def _bindings(pods: Iterable[HistoryPod], index: dict[str, int]) -> list[tuple[float, int, int]]:
    """(time, GPUs taken, node index) for every bind and every end (taking minus GPUs) on a
    node of the window."""
    events = []
    for pod in pods:
        node = index.get(pod.node)
        if pod.scheduled is None or node is None or not pod.gpus:
            continue
        events.append((pod.scheduled, pod.gpus, node))
        if pod.finished is not None:
            events.append((pod.finished, -pod.gpus, node))
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


def _causes(
    queued: list[tuple[HistoryPod, float]],
    pods: Sequence[HistoryPod],
    nodes: Sequence[NodeMembership],
    pool: str,
) -> dict[QueueCause, list[float]]:
    """Each queued pod's wait under its cause (`queued` in creation order), replaying the
    cluster's binds, ends and node changes up to each one's creation. A pool whose pods did
    not queue costs nothing: the replay is the insights' largest cost."""
    by_cause: dict[QueueCause, list[float]] = {c: [] for c in QueueCause}
    if not queued:
        return by_cause
    room = _Room(nodes)
    events, e = sorted(_bindings(pods, room.index) + _node_events(nodes, room)), 0
    for members in _waves(queued):
        first = members[0][0]
        e = room.apply(events, e, first.created)  # the cluster as the pods found it
        gpus = max(pod.gpus for pod, _ in members)
        cause = _cause(room, gpus, pool, len(members))
        by_cause[cause].extend(wait for _, wait in members)
    return by_cause


def _waves(queued: list[tuple[HistoryPod, float]]) -> list[list[tuple[HistoryPod, float]]]:
    """The queued pods (in creation order) in the groups that waited as one: a gang's pods
    created within GANG_WAVE_SECONDS of its first, every other pod alone."""
    waves: list[list[tuple[HistoryPod, float]]] = []
    open_wave: dict[str, list[tuple[HistoryPod, float]]] = {}
    for pod, wait in queued:
        wave = open_wave.get(pod.gang) if pod.gang else None
        if wave is not None and pod.created - wave[0][0].created <= GANG_WAVE_SECONDS:
            wave.append((pod, wait))
            continue
        wave = [(pod, wait)]
        waves.append(wave)
        if pod.gang:
            open_wave[pod.gang] = wave
    return waves


def _cause(room: _Room, gpus: int, pool: str, pods: int = 1) -> QueueCause:
    """Why `pods` pods of `pool` asking for `gpus` each (a gang: all at once) waited, in the
    cluster `room` holds then: room in its pool first (then the pool did not keep them
    waiting), then room in another pool that node selection kept them from, then free GPUs
    its pool had only in pieces, then room on nodes no pool holds; else a plain shortage."""
    if room.has_room(gpus, inside=pool, outside=None, pods=pods):
        return QueueCause.OWN_POOL_ROOM
    if room.has_room(gpus, inside=None, outside=pool, pods=pods):
        return QueueCause.RESTRICTED
    if pool and room.total_free(pool) >= gpus * pods:
        return QueueCause.FRAGMENTED
    if pool and room.has_room(gpus, inside="", outside=None, pods=pods):
        return QueueCause.UNASSIGNED
    return QueueCause.SHORTAGE


def queue_report(
    pods: Sequence[HistoryPod], nodes: Sequence[NodeMembership], pool: str, window: Window
) -> QueueReport:
    """Queue times of the GPU pods of `pool` created in the window. `pods` is the whole
    cluster's history over the window (other pools' pods say when those pools had room);
    a pod's pool is where it was bound, or for a pending pod the pool it asks for. `nodes`:
    every node of the window, as it was (NodeMembership)."""
    mine = sorted(
        (p for p in pods if p.pool == pool and p.gpus and window.contains(p.created)),
        key=lambda p: p.created,
    )
    waits: list[float] = []
    queued: list[tuple[HistoryPod, float]] = []
    halves, waiting, pending = [0, 0], [], 0
    # The halves of the history the window holds: a history younger than the window would
    # leave the first half empty, and any queue would look like a growing one.
    began = max(window.start, min((p.created for p in pods), default=window.start))
    middle = began + (window.end - began) / 2
    for pod in mine:
        end = pod.scheduled if pod.scheduled is not None else (pod.finished or window.end)
        pending += pod.scheduled is None and pod.finished is None
        wait = max(0.0, end - pod.created)
        waits.append(wait)
        if wait < QUEUED_AFTER_SECONDS:
            continue
        halves[pod.created >= middle] += 1
        waiting.append((pod.created, end, pod.gpus))
        queued.append((pod, wait))
    by_cause = _causes(queued, pods, nodes, pool)
    return QueueReport(
        waits=spread(waits),
        queued=sum(halves),
        still_pending=pending,
        by_cause={c: spread(v) for c, v in by_cause.items()},
        first_half=halves[0],
        second_half=halves[1],
        peak_waiting_gpus=_peak(waiting),
    )
