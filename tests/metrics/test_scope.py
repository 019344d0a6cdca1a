"""Every selector of a query narrowed to one cluster's series, and nothing else touched: label
lists, strings, durations, comments, functions and keywords are copied as they came."""

from __future__ import annotations

import re

import pytest

from pools.metrics import queries
from pools.metrics.scope import selecting

EU = 'cluster="eu-west"'


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("up", f"up{{{EU}}}"),
        ('up{job="x"}', f'up{{{EU}, job="x"}}'),
        ('up {job="x",}', f'up{{{EU}, job="x",}}'),  # a trailing comma is PromQL too
        ("up{}", f"up{{{EU}}}"),
        ('{__name__=~"a|b"}', f'{{{EU}, __name__=~"a|b"}}'),
        ("rate(x[5m] offset 1h)", f"rate(x{{{EU}}}[5m] offset 1h)"),
        ("x offset 1h30m", f"x{{{EU}}} offset 1h30m"),
        ("x @ end()", f"x{{{EU}}} @ end()"),
        ("max_over_time((a < bool 1)[7d:1m])", f"max_over_time((a{{{EU}}} < bool 1)[7d:1m])"),
        ("sum by (Hostname, gpu) (a)", f"sum by (Hostname, gpu) (a{{{EU}}})"),
        ("sum(a) without (pod)", f"sum(a{{{EU}}}) without (pod)"),
        ("a or on () count(b)", f"a{{{EU}}} or on () count(b{{{EU}}})"),
        ("a * on (n) group_left (m) b", f"a{{{EU}}} * on (n) group_left (m) b{{{EU}}}"),
        ("a * ignoring(n) group_right c", f"a{{{EU}}} * ignoring(n) group_right c{{{EU}}}"),
        ("a unless b and c", f"a{{{EU}}} unless b{{{EU}}} and c{{{EU}}}"),
        ("Hostname:DCGM_FI_DEV_GPU_UTIL:avg", f"Hostname:DCGM_FI_DEV_GPU_UTIL:avg{{{EU}}}"),
        ('a{x="}{,"} / b', f'a{{{EU}, x="}}{{,"}} / b{{{EU}}}'),  # braces in a string
        ("a{x='q\\'}'}", f"a{{{EU}, x='q\\'}}'}}"),
        (
            'label_replace(a, "dst", "$1", "src", "(.+)")',
            f'label_replace(a{{{EU}}}, "dst", "$1", "src", "(.+)")',
        ),
        ("topk(3, a) > 1e3", f"topk(3, a{{{EU}}}) > 1e3"),
        ('count_values("v", a)', f'count_values("v", a{{{EU}}})'),
        ("vector(time()) >= 12.5 < Inf", "vector(time()) >= 12.5 < Inf"),
        ("0x1f + -.5 - NaN", "0x1f + -.5 - NaN"),
        ("a # not {this}\n+ b", f"a{{{EU}}} # not {{this}}\n+ b{{{EU}}}"),
        ("stddev by (a) (sum(x) by (a))", f"stddev by (a) (sum(x{{{EU}}}) by (a))"),
    ],
)
def test_each_selector_and_nothing_else(written: str, sent: str) -> None:
    assert selecting(written, "cluster", "eu-west") == sent


def test_the_value_is_a_promql_string() -> None:
    assert selecting("up", "cluster", 'a"b\\c') == 'up{cluster="a\\"b\\\\c"}'


@pytest.mark.parametrize("broken", ["sum(up", 'up{a="b"', "rate(up[5m)", "sum by (a (up)"])
def test_an_unbalanced_query_is_a_bug_not_sent(broken: str) -> None:
    with pytest.raises(ValueError, match="unbalanced"):
        selecting(broken, "cluster", "eu-west")


METRICS = {
    *queries.PER_GPU_METRICS,
    queries.ENGINE_ACTIVE,
    *queries.RECORDED.values(),
    queries.UTIL_MAX_RECORDED,
    queries.RECORDED_UTIL_SUM,
    queries.RULES_LOADED,
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NAME = re.compile(r"(?<![\w:])[A-Za-z_:][\w:]*(?![\w:])")


def metric_names(promql: str) -> list[str]:
    """The metric names a portal query reads by name, outside strings (each must be
    selected; a label such as DCGM_FI_DRIVER_VERSION is not one)."""
    return [n for n in _NAME.findall(_STRING.sub('""', promql)) if n in METRICS]


def portal_queries() -> dict[str, str]:
    """Every kind of query the portal builds, over a few nodes and pools."""
    labels = queries.MetricLabels()
    members: queries.Members = {"n-1": [(None, None)], "n.2": [(1.0, 2.0)]}
    built = {
        **queries.node_figure_queries(labels, hot_celsius=85, idle_window="1h"),
        **{
            f"recorded_{k}": q
            for k, q in queries.recorded_figure_queries(
                labels, hot_celsius=85, idle_window="1h"
            ).items()
        },
        "per_gpu": queries.per_gpu_query(labels, "n-1"),
        "history": queries.utilisation_history_query(labels, members),
        "history_recorded": queries.utilisation_history_query(labels, members, recorded=True),
        "xid": queries.xid_query(labels),
        "coverage": queries.coverage_query(labels),
        "driver": queries.driver_query(labels),
        "peaks": queries.framebuffer_peaks_query(labels, 7),
        "idle_pods": queries.idle_pods_query("exported_pod", "exported_namespace", 24, 1),
        "idle_hours": queries.idle_hours_query("exported_pod", "exported_namespace", 7, 1),
        "reporting": queries.pods_reporting_query("exported_pod", "exported_namespace", ["p.1"]),
    }
    for name, q in queries.node_history_queries(labels, "n-1").items():
        built[f"node_{name}"] = q
    pools = {"training": members, "inference": {"n-3": [(None, None)]}}
    for name, q in queries.pool_utilisation_queries(labels, pools).items():
        built[f"pool_{name}"] = q
    for name, q in queries.recorded_pool_utilisation_queries(pools).items():
        built[f"pool_recorded_{name}"] = q
    return built


@pytest.mark.parametrize(("name", "promql"), sorted(portal_queries().items()))
def test_every_query_the_portal_builds_reads_one_cluster(name: str, promql: str) -> None:
    sent = selecting(promql, "cluster", "eu-west")
    named = metric_names(promql)
    # Each metric the query reads carries the cluster's matcher first among its own.
    assert metric_names(sent) == named
    for metric in named:
        assert re.search(rf"{re.escape(metric)}\{{{EU}", sent), f"{name}: {metric} unscoped"
    unnamed = len(re.findall(r"(?:^|[^\w:\s]|\b(?:or|and|unless))\s*\{", _STRING.sub('""', promql)))
    assert sent.count(EU) == len(named) + unnamed
    # Nothing but the matchers was added: take them out, and the query is as written.
    unscoped = sent.replace(f"{{{EU}}}", "").replace(f"{EU}, ", "")
    assert unscoped == promql
