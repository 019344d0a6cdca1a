"""The advisor across clusters (pure): a pool whose GPU pods wait long and often for want of
room in their own cluster, while a pool of another cluster is under-used with GPUs free now,
is told to send that work there.

A node never moves between clusters (its kubelet, its network, its storage are the
cluster's), so the suggestion is where to submit the jobs, not a move: it carries no move
to ask for, and names the fit check across the fleet, which gives the manifest that lands
in the other cluster's pool."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pools.core.insights.advisor import (
    LONG_WAIT_SECONDS,
    MIN_QUEUED,
    OFTEN_QUEUED_SHARE,
    Advice,
    Rule,
    fingerprint_of,
    magnitude,
    under_used,
)
from pools.core.insights.indicators import PoolInsights
from pools.core.insights.queueing import QUEUE_CAUSE_TITLES, QueueCause
from pools.core.wording import counted

# The causes of a wait another cluster can end: no node of the cluster had room, or only
# nodes of another pool did (when no loan inside the cluster is suggested instead).
_CAUSES = (QueueCause.SHORTAGE, QueueCause.RESTRICTED)


@dataclass(frozen=True)
class IdlePool:
    """An under-used pool of a cluster, as the advisors of the other clusters see it."""

    cluster: str
    pool: str
    free_now: int  # GPU units free now on its nodes that take pods
    level: float  # utilisation in percent (allocation where no figures)
    target: float
    idle_share: float  # share of the window with a node idle
    models: tuple[str, ...]  # the GPU models of its nodes with units free now
    from_metrics: bool = True


def idle_pools(cluster: str, pools: Sequence[PoolInsights]) -> list[IdlePool]:
    """The cluster's pools another cluster's waiting work could use now."""
    found = []
    for p in pools:
        if not under_used(p):
            continue
        models = sorted({m for _, m, gpus, held in p.pool.candidates if gpus > held and m})
        u = p.utilisation
        found.append(
            IdlePool(
                cluster,
                p.pool.name,
                p.pool.free_now,
                u.level,
                u.target,
                u.idle_share,
                tuple(models),
                u.from_metrics,
            )
        )
    return found


def _waiting_cause(p: PoolInsights, lent_to: Collection[str]) -> QueueCause | None:
    """Why its pods often wait long, when another cluster could end the wait; None else."""
    q = p.queue
    for cause in _CAUSES:
        if cause == QueueCause.RESTRICTED and p.pool.name in lent_to:
            continue  # a loan inside the cluster is suggested: it ends the wait sooner
        spread = q.by_cause.get(cause)
        if spread is None or spread.count < MIN_QUEUED:
            continue
        if spread.count >= OFTEN_QUEUED_SHARE * q.waits.count and (
            (spread.p50 or 0.0) >= LONG_WAIT_SECONDS
        ):
            return cause
    return None


def _best(p: PoolInsights, idle: Sequence[IdlePool]) -> IdlePool | None:
    """The idle pool of another cluster with a model the pool takes: the one whose free GPUs
    cover the most GPUs that waited at once, else the one with the most free."""
    wanted = max(1, p.queue.peak_waiting_gpus)
    fitting = [i for i in idle if any(p.pool.accepts(m) for m in i.models)]
    if not fitting:
        return None
    return max(fitting, key=lambda i: (i.free_now >= wanted, i.free_now, i.cluster, i.pool))


def _evidence(p: PoolInsights, cause: QueueCause, there: IdlePool) -> list[str]:
    spread = p.queue.by_cause[cause]
    q = p.queue
    level = f"{there.level:.0f}% {'used' if there.from_metrics else 'allocated'}"
    return [
        f"{p.pool.name}: {counted(spread.count, 'GPU pod')} waited for "
        f"{QUEUE_CAUSE_TITLES[cause]} (median {(spread.p50 or 0) / 60:.0f} min, p90 "
        f"{(spread.p90 or 0) / 60:.0f} min); at peak {counted(q.peak_waiting_gpus, 'GPU')} "
        "waited.",
        f"{there.pool} in cluster {there.cluster}: {level} against a target of "
        f"{there.target:.0f}%; a node idle {100 * there.idle_share:.0f}% of the time; "
        f"{counted(there.free_now, 'GPU')} free now ({', '.join(there.models)}).",
        f"A node cannot move between clusters: submit these jobs to {there.cluster} with "
        f"{there.pool}'s scheduling block. The fit check across the fleet gives the manifest.",
    ]


def send_elsewhere_advice(
    pools: Sequence[PoolInsights], lent_to: Collection[str], idle: Sequence[IdlePool]
) -> list[Advice]:
    """For each pool of this cluster whose pods wait for room it cannot get here, the idle
    pool of another cluster to send the work to. `lent_to`: the pools a loan inside the
    cluster is already suggested for."""
    found = []
    for p in pools:
        cause = _waiting_cause(p, lent_to)
        if cause is None or (there := _best(p, idle)) is None:
            continue
        spread = p.queue.by_cause[cause]
        wanted = max(1, p.queue.peak_waiting_gpus)
        strength = (
            min(1.0, spread.count / (3 * MIN_QUEUED)) * 0.5
            + there.idle_share * 0.3
            + 0.2 * min(1.0, there.free_now / wanted)
        )
        found.append(
            Advice(
                rule=Rule.SEND_ELSEWHERE,
                pools=(p.pool.name, f"{there.cluster}/{there.pool}"),
                title=f"Send {p.pool.name}'s waiting jobs to {there.pool} in cluster "
                f"{there.cluster}",
                evidence=_evidence(p, cause, there),
                confidence=round(min(1.0, strength), 2),
                fingerprint=fingerprint_of(there.cluster, there.pool, magnitude(spread.count)),
            )
        )
    return found
