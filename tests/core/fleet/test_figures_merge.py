"""The cluster's figures merged from its pools' equal those computed over every row."""

from __future__ import annotations

import dataclasses
import math

from pools.core.figures import NodeMetrics, NodeRow, group_by_pool, merge_figures, pool_figures


def rows() -> list[NodeRow]:
    made = []
    for i in range(40):
        metrics = (
            None
            if i % 7 == 0
            else NodeMetrics(
                gpus_reporting=8,
                util=None if i % 5 == 0 else float(i * 2 % 100),
                fb_used=1000.0 * i,
                fb_total=80_000.0,
                temp_max=60.0 + i,
                power=300.0,
                xid_gpus=i % 3 == 0,
                hot_gpus=i % 4 == 0,
                idle_held_gpus=i % 6 == 0,
            )
        )
        pool = (None, "training", "inference", "shared")[i % 4]
        model = ("A100", "H100", "")[i % 3]
        made.append(
            NodeRow(f"n{i}", pool, model, 8, i % 9, i % 5 != 0, i % 8 == 0, i % 10 == 0, metrics)
        )
    return made


def test_merging_the_pools_figures_gives_the_clusters() -> None:
    for available in (True, False):
        whole = pool_figures(rows(), metrics_available=available)
        parts = [
            pool_figures(g, metrics_available=available) for g in group_by_pool(rows()).values()
        ]
        merged = merge_figures(parts, metrics_available=available)
        assert dataclasses.replace(merged, avg_util=None) == dataclasses.replace(
            whole, avg_util=None
        )
        if available:
            assert whole.avg_util is not None and math.isclose(merged.avg_util or 0, whole.avg_util)
        else:
            assert merged.avg_util is None and whole.avg_util is None


def test_merging_nothing_is_empty() -> None:
    assert merge_figures([], metrics_available=True) == pool_figures([], metrics_available=True)
