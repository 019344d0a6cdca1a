"""The recorded per-pool sums as the overview reads them, and the membership digest that says
whether they were made over the portal's current membership."""

from __future__ import annotations

from pools.core.figures import NodeMetrics, NodeRow, pool_figures
from pools.core.pool_sums import (
    PoolSums,
    figures_with_sums,
    membership_digest,
    recorded_sums,
)

MEMBERS = [("gpu-a", "training"), ("gpu-b", "training"), ("gpu-c", None)]


def test_the_digest_ignores_order_and_sees_any_move() -> None:
    digest = membership_digest(MEMBERS)
    assert membership_digest(list(reversed(MEMBERS))) == digest
    assert len(digest) == 24 and int(digest, 16) >= 0
    moved = [("gpu-a", "inference"), *MEMBERS[1:]]
    assert membership_digest(moved) != digest
    assert membership_digest([*MEMBERS, ("gpu-d", None)]) != digest
    assert membership_digest([("gpu-c", ""), *MEMBERS[:2]]) == digest  # no pool is no pool


def complete(
    pool: str | None, digest: str = "d1", **values: float
) -> list[tuple[str, tuple[dict[str, str], float]]]:
    labels = {"portal_pool": pool, "digest": digest} if pool else {"digest": digest}
    figures = {
        "nodes_reporting": 2,
        "util_gpus": 16,
        "util_sum": 800,
        "xid_gpus": 1,
        "hot_gpus": 0,
        "idle_held_gpus": 3,
        **values,
    }
    thresholds = {"hot_gpus": {"hot_celsius": "85"}, "idle_held_gpus": {"window": "1h"}}
    return [(f, ({**labels, **thresholds.get(f, {})}, v)) for f, v in figures.items()]


def grouped(*parts: list[tuple[str, tuple[dict[str, str], float]]]):  # type: ignore[no-untyped-def]
    series: dict[str, list[tuple[dict[str, str], float]]] = {}
    for part in parts:
        for figure, sample in part:
            series.setdefault(figure, []).append(sample)
    return series


THRESHOLDS = {"hot_gpus": "85", "idle_held_gpus": "1h"}


def test_sums_are_read_per_pool_at_this_portals_thresholds() -> None:
    series = grouped(complete("training"), complete(None, util_sum=160, util_gpus=8))
    # The same figure at another threshold (a second rule someone added) is not ours.
    series["hot_gpus"].append(({"portal_pool": "training", "hot_celsius": "70", "digest": "d1"}, 9))
    sums = recorded_sums(series, THRESHOLDS)
    assert sums.digest == "d1" and sums.complete
    assert sums.by_pool["training"].hot_gpus == 0
    assert sums.by_pool[None].util_sum == 160


def test_sums_of_two_memberships_or_missing_a_figure_are_not_used() -> None:
    # An evaluation under way: some figures already over the new membership. A miss, not
    # "no rules here": the next page asks again.
    mixed = grouped(complete("training", "d1"), complete("inference", "d2"))
    assert recorded_sums(mixed, THRESHOLDS).digest is None
    assert recorded_sums(mixed, THRESHOLDS).complete
    # Rules made at another threshold: no series at ours, so no usable sums, for a while.
    other = recorded_sums(grouped(complete("training")), {**THRESHOLDS, "hot_gpus": "70"})
    assert other.digest is None and not other.complete
    # Nothing recorded at all.
    assert recorded_sums({}, THRESHOLDS).digest is None


def test_figures_from_sums_equal_those_summed_over_each_node() -> None:
    metrics = [
        NodeMetrics(gpus_reporting=8, util=50.0, fb_used=10.0, fb_total=80.0, xid_gpus=1),
        NodeMetrics(gpus_reporting=4, util=20.0, fb_used=5.0, fb_total=40.0, idle_held_gpus=2),
        None,
    ]
    rows = [
        NodeRow(f"gpu-{i}", "training", "A100", 8, 4, True, False, False, m)
        for i, m in enumerate(metrics)
    ]
    summed = pool_figures(rows, metrics_available=True)
    sums = PoolSums(
        nodes_reporting=2,
        util_gpus=12,
        util_sum=8 * 50.0 + 4 * 20.0,
        fb_used=15.0,
        fb_total=120.0,
        xid_gpus=1,
        idle_held_gpus=2,
    )
    bare = [NodeRow(r.name, r.pool, r.gpu_model, 8, 4, True, False, False) for r in rows]
    assert figures_with_sums(bare, sums, metrics_available=True) == summed
    # Without metrics, the sums are not read at all.
    assert figures_with_sums(bare, sums, metrics_available=False) == pool_figures(
        bare, metrics_available=False
    )
