from __future__ import annotations

import dataclasses

from pools.core.insights.indicators import PoolInsights
from pools.insights import gather
from pools.metrics.insights import PoolSeries
from pools.models import Pool
from tests.insights.scenarios import DAYS, NOW, World


def world_insights(world: World) -> dict[str, PoolInsights]:
    """Every active pool's indicators, read from the rows as the pages read them, with the
    scenario's utilisation series and XID errors in place of Prometheus's."""
    gathered = dataclasses.replace(
        gather.gather(days=DAYS, now=NOW),
        series=PoolSeries(world.average, world.idle_nodes),
        xid_times=world.xid_times,
    )
    return {p.name: gather.indicators(gathered, p) for p in Pool.objects.active()}
