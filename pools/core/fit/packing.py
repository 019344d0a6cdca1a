"""How many pods fit now, placed one after another on the nodes the filters accept (pure).

Pods of one template are identical, so how many fit does not depend on which node the
scheduler scores highest: each node takes as many as its free resources and free pod slots
allow, and the total is the sum. Pods of several templates (a head and its workers, a
launcher and its workers) compete for the same room, so they are placed in the workload's
order, each on the feasible node with the fewest free GPUs (ties by name) — the tightest
packing, which keeps whole nodes free for the pods that need them. The default scheduler
spreads instead (LeastAllocated scoring), so for mixed templates the count is the best case,
which is the right bound for "can this gang start at all".
"""

from __future__ import annotations

from collections.abc import Sequence

from pools.core.dra.inventory import DeviceId
from pools.core.fit.cluster import ClusterSnapshot
from pools.core.fit.plugins import FilterRun, pods_that_fit
from pools.core.fit.resources import Resources


def room(run: FilterRun, indexes: Sequence[int]) -> int:
    """Pods of this shape that fit now on the given nodes, in total."""
    snapshot, request = run.snapshot, run.shape.requests
    total = 0
    for i in indexes:
        if run.passes_static(i):
            most = pods_that_fit(request, snapshot.free[i], snapshot.free_pods[i])
            total += run.claim_room(i, frozenset(), most)[0] if most else 0
    return total


def place(runs: Sequence[FilterRun], wanted: Sequence[int], indexes: Sequence[int]) -> list[int]:
    """Pods of each template placed together, in order; returns how many of each found room."""
    if not runs:
        return []
    snapshot: ClusterSnapshot = runs[0].snapshot
    free = {i: snapshot.free[i] for i in indexes}
    free_pods = {i: snapshot.free_pods[i] for i in indexes}
    devices: dict[int, frozenset[DeviceId]] = {}  # DRA devices the placed pods hold
    placed = []
    for run, count in zip(runs, wanted, strict=True):
        request = run.shape.requests
        candidates = sorted(
            (i for i in indexes if run.passes_static(i)),
            key=lambda i: (free[i].gpu, snapshot.nodes[i].name),
        )
        remaining = count
        for i in candidates:
            if remaining <= 0:
                break
            take = min(remaining, pods_that_fit(request, free[i], free_pods[i]))
            if take and run.claims is not None:
                take, devices[i] = run.claim_room(i, devices.get(i, frozenset()), take)
            if take:
                free[i] = free[i].minus(_times(request, take))
                free_pods[i] -= take
                remaining -= take
        placed.append(count - remaining)
    return placed


def _times(request: Resources, count: int) -> Resources:
    return Resources(
        request.cpu_milli * count,
        request.memory * count,
        request.gpu * count,
        tuple((name, amount * count) for name, amount in request.extended),
    )
