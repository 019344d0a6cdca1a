"""Where a node goes, under today's pool definitions: the one place that turns the active
pools into the target a move, a loan's return, a break-glass assignment and the node page
work from (the pool's labels and taint, and every label and taint key the portal manages)."""

from __future__ import annotations

from collections.abc import Sequence

from pools.common.cluster_access import pool_label_key
from pools.core.desired import PoolSpec, Target, move_target
from pools.models import Pool


def active_pool_specs() -> list[PoolSpec]:
    """Every active pool as the core sees it (one SQL query)."""
    return [p.spec() for p in Pool.objects.active()]


def pool_target(pool: PoolSpec | None, specs: Sequence[PoolSpec] | None = None) -> Target:
    """The target for `pool` (None: out of every pool) under `specs`, the active pools'
    definitions unless given (a caller working through many nodes reads them once)."""
    specs = active_pool_specs() if specs is None else specs
    return move_target(pool, specs, pool_key=pool_label_key())
