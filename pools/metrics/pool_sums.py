"""Every pool's figures as the recording rules added them up (pools.core.pool_sums): one
instant query, kept METRICS_CACHE_SECONDS like any other answer.

A Prometheus with no such series (no rules, no scrape of the portal's membership), or with
rules of other thresholds, is remembered for RAW_RECHECK_SECONDS: pages go straight to the
per-node figures meanwhile, and ask again later (rules loaded since, a scrape job added).
Sums that are there but not usable now (made over another membership, an evaluation under
way) are only a miss: the next page asks again."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.cache import cache

from pools.core.pool_sums import RECORDED_SUMS, RecordedSums, recorded_sums
from pools.metrics import queries, source
from pools.metrics.dcgm import metric_labels
from pools.metrics.node_figures import RAW_RECHECK_SECONDS

_QUERY = '{__name__=~"%s"}' % "|".join(  # noqa: UP031 -- braces of PromQL in an f-string
    re.escape(name) for name in RECORDED_SUMS.values()
)
_FIGURE_OF = {series: figure for figure, series in RECORDED_SUMS.items()}


def recorded_pool_sums() -> RecordedSums | None:
    """The recorded per-pool sums and the digest of the membership they were made over;
    None when this Prometheus has none, cannot answer, or the rules' terms are not this
    deployment's (another node or pod label)."""
    labels = metric_labels()
    if labels.node != queries.RULES_NODE_LABEL or labels.pod != queries.RULES_POD_LABEL:
        return None
    absent = source.cache_key("pool-sums-absent")
    if cache.get(absent):
        return None
    result = source.instant({"pools": _QUERY})
    if not result.available:
        return None  # the per-node figures say what is missing
    samples = result.series.get("pools", [])
    series: dict[str, list[tuple[dict[str, str], float]]] = {}
    for sample in samples:
        figure = _FIGURE_OF.get(sample.labels.get("__name__", ""))
        if figure is not None:
            series.setdefault(figure, []).append((dict(sample.labels), sample.value))
    thresholds = {
        "hot_gpus": f"{settings.GPU_HOT_CELSIUS:g}",
        "idle_held_gpus": settings.GPU_IDLE_WINDOW,
    }
    sums = recorded_sums(series, thresholds)
    if not samples or not sums.complete:  # no rules here, or rules of other terms
        cache.set(absent, True, RAW_RECHECK_SECONDS)
    return sums if sums.digest is not None else None
