"""Every node's DCGM figures, fetched in one batch of queries and shared through the Django
cache (Redis in production) in a compact form, a tuple a node.

Three things keep pages fast at thousands of nodes without ever showing figures older than
METRICS_CACHE_SECONDS:

- one refresher in the whole deployment: whoever finds the figures missing takes a lock in
  the shared cache (`cache.add`, atomic in Redis, with a TTL so a refresher that dies frees
  it) and asks Prometheus; every other web process and thread waits for its result instead
  of asking too. The lock is only as wide as the cache: with the default in-memory cache
  (no CACHE_URL) each process is its own deployment;
- the refresh starts ahead, in a background thread under the same lock, once an entry is
  70 % through its life, so pages rarely wait at all;
- each process keeps the entry it last unpickled, and checks a small version key instead
  of loading 5,000 tuples on every request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import astuple
from typing import Any

from django.conf import settings
from django.core.cache import cache

from pools import observability
from pools.core.figures import NodeMetrics, node_metrics_from_series
from pools.metrics import queries, source
from pools.metrics.dcgm import metric_labels
from pools.metrics.results import InstantResult

Entry = tuple[float, str | None, dict[str, tuple[Any, ...]]]  # made at, error, per node
REFRESH_AHEAD_AT = 0.7  # of METRICS_CACHE_SECONDS
WAIT_STEP_SECONDS = 0.02


class LazyNodeMetrics(Mapping[str, NodeMetrics]):
    """Per-node figures built on access: an API page of 100 nodes builds 100, not 5,000."""

    def __init__(self, compact: dict[str, tuple[Any, ...]]) -> None:
        self._compact = compact

    def __getitem__(self, name: str) -> NodeMetrics:
        return NodeMetrics(*self._compact[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._compact)

    def __len__(self) -> int:
        return len(self._compact)


def _lock_seconds() -> float:
    # Long enough for one round of queries (each bounded by PROMETHEUS_TIMEOUT, run in
    # parallel), short enough that a refresher killed mid-round holds nobody up for long.
    return settings.PROMETHEUS_TIMEOUT + 2.0


class NodeFigureCache:
    def __init__(self) -> None:
        self._memo: Entry | None = None

    def _keys(self) -> tuple[str, dict[str, str]]:
        promql = queries.node_figure_queries(
            metric_labels(),
            hot_celsius=settings.GPU_HOT_CELSIUS,
            idle_window=settings.GPU_IDLE_WINDOW,
        )
        key = source.cache_key(
            "node-figures",
            settings.PROMETHEUS_URL,
            settings.DCGM_NODE_LABEL,
            sorted(promql.items()),
        )
        return key, promql

    def _stored(self, key: str) -> Entry | None:
        """The shared entry, if there is a current one (the memo spares the unpickling)."""
        version = cache.get(f"{key}:version")
        if version is None:
            return None
        if self._memo is not None and self._memo[0] == version:
            return self._memo
        entry = cache.get(key)
        return entry if entry is not None and entry[0] == version else None

    def _refresh(self, key: str, promql: dict[str, str]) -> Entry:
        result = source.instant(promql, use_cache=False)
        per_node = (
            node_metrics_from_series(result.series, settings.DCGM_NODE_LABEL)
            if result.available
            else {}
        )
        entry: Entry = (time.time(), result.error, {n: astuple(m) for n, m in per_node.items()})
        ttl = settings.METRICS_CACHE_SECONDS
        cache.set(key, entry, ttl)
        cache.set(f"{key}:version", entry[0], ttl)
        return entry

    def _refresh_once(self, key: str, promql: dict[str, str]) -> Entry:
        """Wait for whoever holds the refresh lock, or take it and refresh."""
        lock = f"{key}:refreshing"
        deadline = time.monotonic() + _lock_seconds()
        while True:
            entry = self._stored(key)
            if entry is not None:
                return entry
            if cache.add(lock, 1, _lock_seconds()):
                try:
                    # Someone may have stored it between our look and our lock.
                    return self._stored(key) or self._refresh(key, promql)
                finally:
                    cache.delete(lock)
            if time.monotonic() >= deadline:
                return self._refresh(key, promql)  # the holder is gone or stuck
            time.sleep(WAIT_STEP_SECONDS)

    def _refresh_ahead(self, key: str, promql: dict[str, str]) -> None:
        lock = f"{key}:refreshing"
        if not cache.add(lock, 1, _lock_seconds()):
            return  # someone in the deployment is on it

        def run() -> None:
            try:
                self._refresh(key, promql)
            finally:
                cache.delete(lock)

        threading.Thread(target=run, daemon=True, name="node-figures").start()

    def get(self) -> tuple[InstantResult, Mapping[str, NodeMetrics]]:
        key, promql = self._keys()
        entry = self._stored(key)
        observability.cache_lookup("node_figures", hit=entry is not None)
        if entry is None:
            entry = self._refresh_once(key, promql)
        elif time.time() - entry[0] > REFRESH_AHEAD_AT * settings.METRICS_CACHE_SECONDS:
            self._refresh_ahead(key, promql)
        self._memo = entry
        _, error, compact = entry
        return InstantResult(error=error), LazyNodeMetrics(compact)


_node_figures = NodeFigureCache()


def latest_node_metrics() -> tuple[InstantResult, Mapping[str, NodeMetrics]]:
    """Every node's current DCGM figures (by node name; a node absent has no DCGM series),
    and the result's error when Prometheus could not answer."""
    return _node_figures.get()
