"""The PromQL that counts each node in a pool only while it was a member: one expression a
figure whatever the number of nodes and moves, the time spans evaluated by Prometheus
(`vector(time())` filtered to the span), nodes there all along in one matcher."""

from __future__ import annotations

from pools.metrics.queries import (
    MetricLabels,
    pool_utilisation_queries,
    recorded_pool_utilisation_queries,
    utilisation_history_query,
)

LABELS = MetricLabels(node="Hostname")


def test_nodes_there_all_along_need_no_time_condition() -> None:
    promql = utilisation_history_query(LABELS, {"a": ((None, None),), "b": ((None, None),)})
    assert "time()" not in promql
    assert 'Hostname=~"a|b"' in promql


def test_a_lent_node_counts_only_from_the_moment_it_joined() -> None:
    members = {"a": ((None, None),), "lent": ((1000.0, None),), "gone": ((None, 500.5),)}
    promql = utilisation_history_query(LABELS, members, recorded=True)
    assert (
        'Hostname:DCGM_FI_DEV_GPU_UTIL:sum{Hostname=~"lent"} and on () (vector(time()) >= 1000.000)'
        in promql
    )
    assert "and on () (vector(time()) < 500.500)" in promql
    # Recorded series carry the rules' label only: no second spelling asked.
    assert "hostname=~" not in promql


def test_a_node_in_and_out_twice_is_one_clause_with_both_spans() -> None:
    members = {"n": ((None, 100.0), (200.0, 300.0))}
    promql = utilisation_history_query(LABELS, members)
    assert "(vector(time()) < 100.000 or vector(time()) >= 200.000 < 300.000)" in promql


def test_nodes_lent_together_share_one_clause() -> None:
    members = {f"n{i}": ((1000.0, None),) for i in range(50)}
    promql = utilisation_history_query(LABELS, members)
    assert promql.count("vector(time())") == 1


def test_every_pool_s_figure_is_one_query_however_many_moved() -> None:
    pools = {
        f"p{p}": {
            f"p{p}-n{i}": ((None, None),) if i % 3 else ((i * 10.0, None),) for i in range(30)
        }
        for p in range(5)
    }
    for found in (
        pool_utilisation_queries(LABELS, pools),
        recorded_pool_utilisation_queries(pools),
    ):
        assert set(found) == {"average", "idle_nodes"}
        assert all(f'"portal_pool", "p{p}"' in found["average"] for p in range(5))


def test_a_not_ready_node_weighs_in_the_average_but_is_never_an_idle_node() -> None:
    pools = {"mixed": {"up": ((None, None),), "down": ((None, None),)}}
    for found in (
        pool_utilisation_queries(LABELS, pools, never_idle={"down"}),
        recorded_pool_utilisation_queries(pools, never_idle={"down"}),
    ):
        assert '"down|up"' in found["average"]
        assert '"up"' in found["idle_nodes"] and "down" not in found["idle_nodes"]
    # A pool whose only node is down has no idle count at all.
    lone = {"mixed": {"down": ((None, None),)}}
    assert "down" not in pool_utilisation_queries(LABELS, lone, never_idle={"down"})["idle_nodes"]
