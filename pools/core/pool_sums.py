"""Each pool's metric figures already added up by Prometheus, and the membership they were
added up over.

At tens of thousands of nodes, asking every node's figures and adding them up per pool costs
Prometheus about a second of CPU a figure and the portal the decoding of every value. The
portal instead exports each node's pool (`gpu_pool_portal_node_pool{Hostname, portal_pool}`,
with a digest of the whole membership beside it), and recording rules join the per-node
recorded series on it: the overview reads a few series a pool.

Those sums are right only for the membership Prometheus last scraped. Each carries that
membership's digest as a label (the rules read the membership and its digest in one
expression, so both come from one scrape, and every sum reads that one evaluation): the
portal uses them only where every one has its own membership's digest, so a node moved since
is never counted in its old pool.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pools.core.figures import NodeRow, PoolFigures, pool_figures

# The exported series and its labels. The node label is the recording rules' own (their
# per-node series are keyed by it); a node without a pool has no pool label, so that the
# rules' `by (portal_pool)` puts the unassigned nodes in a group of their own.
MEMBERSHIP = "gpu_pool_portal_node_pool"
MEMBERSHIP_DIGEST = "gpu_pool_portal_membership_digest"
POOL_LABEL = "portal_pool"
NODE_LABEL = "Hostname"
DIGEST_LABEL = "digest"

# What the rules record per pool (deploy/prometheus/rules.yml, group gpu-pool-portal.pool).
RECORDED_SUMS = {
    "nodes_reporting": "portal_pool:nodes_reporting:count",
    "util_gpus": "portal_pool:DCGM_FI_DEV_GPU_UTIL:count",
    "util_sum": "portal_pool:DCGM_FI_DEV_GPU_UTIL:sum",
    "fb_used": "portal_pool:DCGM_FI_DEV_FB_USED:sum",
    "fb_total": "portal_pool:DCGM_FI_DEV_FB_TOTAL:sum",
    "xid_gpus": "portal_pool:DCGM_FI_DEV_XID_ERRORS:count_nonzero",
    "hot_gpus": "portal_pool:DCGM_FI_DEV_GPU_TEMP:count_hot",
    "idle_held_gpus": "portal_pool:DCGM_FI_DEV_GPU_UTIL:count_held_idle",
}
# Figures made with a threshold carry it as a label, as the per-node series do.
THRESHOLD_LABELS = {"hot_gpus": "hot_celsius", "idle_held_gpus": "window"}
# Figures every pool with a reporting node has (the per-node counts are zero-filled): one
# missing means the rules were made with another threshold, or are not all loaded.
EVERY_POOL_HAS = frozenset(
    {"nodes_reporting", "util_gpus", "util_sum", "xid_gpus", "hot_gpus", "idle_held_gpus"}
)


def membership_digest(members: Iterable[tuple[str, str | None]]) -> str:
    """A digest of (node, pool or None) pairs, whatever their order: the same in the process
    that exports the membership and the one that reads the sums made over it."""
    lines = sorted(f"{node}\t{pool or ''}" for node, pool in members)
    return hashlib.blake2b("\n".join(lines).encode(), digest_size=12).hexdigest()


@dataclass(frozen=True)
class PoolSums:
    nodes_reporting: int = 0
    util_gpus: float = 0.0
    util_sum: float = 0.0
    fb_used: float = 0.0
    fb_total: float = 0.0
    xid_gpus: int = 0
    hot_gpus: int = 0
    idle_held_gpus: int = 0


@dataclass(frozen=True)
class RecordedSums:
    digest: str | None  # None: the sums are not one membership's, or not all there
    by_pool: Mapping[str | None, PoolSums]
    # Every pool has every figure at this portal's thresholds (else rules of other terms).
    complete: bool = True


Labelled = Iterable[tuple[Mapping[str, str], float]]


def recorded_sums(series: Mapping[str, Labelled], thresholds: Mapping[str, str]) -> RecordedSums:
    """The per-pool sums from the recorded series (by figure name, as RECORDED_SUMS), those
    of a threshold only at this portal's (`thresholds`: figure name -> label value), and the
    digest they all carry. No digest when they cannot stand for the per-node figures: made
    over two memberships (an evaluation under way), or a pool missing one of them."""
    digests: set[str | None] = set()
    values: dict[str | None, dict[str, float]] = {}
    for figure, samples in series.items():
        label = THRESHOLD_LABELS.get(figure)
        for labels, value in samples:
            if label is not None and labels.get(label) != thresholds.get(figure):
                continue
            pool = labels.get(POOL_LABEL) or None
            values.setdefault(pool, {})[figure] = value
            digests.add(labels.get(DIGEST_LABEL))
    by_pool = {pool: _sums(figures) for pool, figures in values.items()}
    complete = all(figures.keys() >= EVERY_POOL_HAS for figures in values.values())
    digest = digests.pop() if len(digests) == 1 and complete else None
    return RecordedSums(digest, by_pool, complete)


def _sums(figures: Mapping[str, float]) -> PoolSums:
    counts = {"nodes_reporting", "xid_gpus", "hot_gpus", "idle_held_gpus"}
    return PoolSums(
        **{
            name: (round(value) if name in counts else value)  # type: ignore[arg-type]
            for name, value in figures.items()
        }
    )


def figures_with_sums(
    rows: list[NodeRow], sums: PoolSums | None, *, metrics_available: bool
) -> PoolFigures:
    """The pool's figures from its node rows (without metrics) and its recorded sums: what
    pool_figures gives over the same rows with every node's metrics."""
    base = pool_figures(rows, metrics_available=metrics_available)
    if not metrics_available:
        return base
    sums = sums or PoolSums()
    return dataclasses.replace(
        base,
        avg_util=sums.util_sum / sums.util_gpus if sums.util_gpus else None,
        fb_used=sums.fb_used,
        fb_total=sums.fb_total,
        xid_gpus=sums.xid_gpus,
        hot_gpus=sums.hot_gpus,
        idle_held_gpus=sums.idle_held_gpus,
        nodes_without_metrics=max(0, base.nodes - sums.nodes_reporting),
        util_gpus=sums.util_gpus,
    )
