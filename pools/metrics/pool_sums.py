"""Every pool's figures as the recording rules added them up (pools.core.pool_sums): one
instant query, kept METRICS_CACHE_SECONDS like any other answer.

A Prometheus without those rules (or without the portal's membership scraped) is remembered
for RAW_RECHECK_SECONDS, so that pages go straight to the per-node figures meanwhile and ask
again later (rules loaded since, a scrape job added)."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.cache import cache

from pools.core.pool_sums import RECORDED_DIGEST, RECORDED_SUMS, RecordedSums, recorded_sums
from pools.metrics import queries, source
from pools.metrics.dcgm import metric_labels
from pools.metrics.node_figures import RAW_RECHECK_SECONDS

_QUERY = '{__name__=~"%s"}' % "|".join(  # noqa: UP031 -- braces of PromQL in an f-string
    re.escape(name) for name in (*RECORDED_SUMS.values(), RECORDED_DIGEST)
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
    series: dict[str, list[tuple[dict[str, str], float]]] = {}
    digest: list[tuple[dict[str, str], float]] = []
    for sample in result.series.get("pools", []):
        name = sample.labels.get("__name__", "")
        if name == RECORDED_DIGEST:
            digest.append((dict(sample.labels), sample.value))
        elif name in _FIGURE_OF:
            series.setdefault(_FIGURE_OF[name], []).append((dict(sample.labels), sample.value))
    thresholds = {
        "hot_gpus": f"{settings.GPU_HOT_CELSIUS:g}",
        "idle_held_gpus": settings.GPU_IDLE_WINDOW,
    }
    sums = recorded_sums(series, digest, thresholds)
    if sums.digest is None:
        cache.set(absent, True, RAW_RECHECK_SECONDS)
        return None
    return sums
