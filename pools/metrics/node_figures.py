"""Every node's DCGM figures, fetched in one batch of queries and shared through the Django
cache (Redis in production) in a compact form, a tuple a node.

What keeps pages fast at thousands of nodes, with figures at most METRICS_CACHE_SECONDS old,
or METRICS_STALE_SECONDS more while their refresh is under way:

- one refresher in the whole deployment: whoever finds the figures missing takes a lock in
  the shared cache (`cache.add`, atomic in Redis, with a TTL so a refresher that dies frees
  it) and asks Prometheus; every other web process and thread waits for its result instead
  of asking too. The lock is only as wide as the cache: with the default in-memory cache
  (no CACHE_URL) each process is its own deployment;
- the refresh starts ahead, in a background thread under the same lock, once an entry is
  70 % through its life, so pages rarely wait at all; nobody waits for that one, so it asks
  its queries one after another and Prometheus takes one core at a time;
- figures whose refresh outlasts their life (65,000 nodes: a round takes seconds) are still
  served for METRICS_STALE_SECONDS past it, with their time, while the refresh runs: pages
  would otherwise all wait for it at once. Past that grace, or with none, pages wait;
- each process keeps the entry it last unpickled, and checks a small version key instead
  of loading 5,000 tuples on every request; with the shared cache unreachable it serves
  that entry for its lifetime and refreshes it itself (pools.common.guarded_cache);
- figures derived from the entry and the inventory (the per-pool figures) are kept with
  it, under the entry's time and the caller's inventory version (`derived_figures`), so a
  warm overview neither reads every node row nor sums them again.

A page waits for the figures at most its one PROMETHEUS_TIMEOUT (pools.metrics.source),
whether it asks Prometheus itself or waits for the deployment's refresher.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache

from pools.common import guarded_cache, observability
from pools.common.cluster_access import current_cluster
from pools.core.cluster_scope import cluster_scope
from pools.core.figures import NodeMetrics, node_metric_rows
from pools.core.gc_pause import collector_paused
from pools.metrics import queries, source
from pools.metrics.dcgm import metric_labels
from pools.metrics.results import InstantResult
from pools.metrics.vectors import NodeValue

# Made at, error, per node, and where each figure came from ("recorded" or "raw").
Entry = tuple[float, str | None, dict[str, tuple[Any, ...]], dict[str, str]]
# How long figures found without recorded series are asked raw before the recorded ones
# are tried again (rules loaded later, a Prometheus restarted).
RAW_RECHECK_SECONDS = 300
REFRESH_AHEAD_AT = 0.7  # of METRICS_CACHE_SECONDS
WAIT_STEP_SECONDS = 0.02
Derived = TypeVar("Derived")
log = logging.getLogger(__name__)


class LazyNodeMetrics(Mapping[str, NodeMetrics]):
    """Per-node figures built on access: an API page of 100 nodes builds 100, not 5,000."""

    def __init__(self, compact: dict[str, tuple[Any, ...]]) -> None:
        self._compact = compact

    def __getitem__(self, name: str) -> NodeMetrics:
        return NodeMetrics(*self._compact[name])

    def get(self, name: str, default: Any = None) -> Any:
        # Mapping.get goes through __getitem__ and a KeyError for every node without
        # metrics: a page of 15,000 rows asks once a row.
        row = self._compact.get(name)
        return NodeMetrics(*row) if row is not None else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._compact)

    def __len__(self) -> int:
        return len(self._compact)


def _stale_seconds() -> int:
    # Nothing kept (METRICS_CACHE_SECONDS=0), nothing served late.
    return settings.METRICS_STALE_SECONDS if settings.METRICS_CACHE_SECONDS else 0


def _servable(entry: Entry) -> bool:
    """Whether figures may still be served: within their life and the grace after it (the
    shared cache's expiry is kept to whole seconds, so the age is checked here)."""
    limit = settings.METRICS_CACHE_SECONDS + _stale_seconds()
    return time.time() - entry[0] <= limit


def _lock_seconds() -> float:
    # Long enough for one round of queries (each bounded by PROMETHEUS_TIMEOUT, run in
    # parallel), short enough that a refresher killed mid-round holds nobody up for long.
    return settings.PROMETHEUS_TIMEOUT + 2.0


def _ahead_lock_seconds(plan: Plan) -> float:
    # A refresh ahead asks its queries one after another, each within PROMETHEUS_TIMEOUT,
    # and twice for figures found without recorded series: held for less, the lock would
    # let a second process start a second round beside it, and both would be slower.
    return 2 * len(plan.raw) * settings.PROMETHEUS_TIMEOUT + 2.0


@dataclass(frozen=True)
class Plan:
    raw: dict[str, str]  # every figure's raw expression
    recorded: dict[str, str]  # the recorded series standing for some of them


def _ask(
    key: str, plan: Plan, *, in_turn: bool = False
) -> tuple[str | None, dict[str, list[NodeValue]], dict[str, str]]:
    """Every figure as (node, value) pairs, from its recorded series where the rules made
    one and raw otherwise, or the reason there are none: one round of queries, and a second
    for the figures found without recorded series (remembered for RAW_RECHECK_SECONDS, so
    later rounds go straight to raw). And where each figure came from."""
    raw_only: set[str] = cache.get(f"{key}:raw-only") or set()
    recorded = {n: q for n, q in plan.recorded.items() if n not in raw_only}
    node_label = settings.DCGM_NODE_LABEL
    asked = {**plan.raw, **recorded}
    values, error = source.instant_node_values(asked, node_label, in_turn=in_turn)
    if error:
        return error, {}, {}
    missing = queries.missing_recorded(recorded, values)
    if missing:
        raw = {n: plan.raw[n] for n in missing}
        second, error = source.instant_node_values(raw, node_label, in_turn=in_turn)
        if error:
            return error, {}, {}
        values.update(second)
        cache.set(f"{key}:raw-only", raw_only | missing, RAW_RECHECK_SECONDS)
    sources = {n: "recorded" if n in recorded and n not in missing else "raw" for n in plan.raw}
    return None, values, sources


class NodeFigureCache:
    def __init__(self) -> None:
        self._memo: Entry | None = None
        self._loading = threading.Lock()
        self._ahead = threading.Lock()  # held while this process refreshes ahead
        # Per derived figure: the key it was last read or made under, and its value.
        self._derived: dict[str, tuple[str, Any]] = {}
        self._kept_keys: tuple[tuple[Any, ...], tuple[str, Plan]] | None = None

    def _keys(self) -> tuple[str, Plan]:
        labels = metric_labels()
        options = {"hot_celsius": settings.GPU_HOT_CELSIUS, "idle_window": settings.GPU_IDLE_WINDOW}
        # Asked by every request: the queries are written and hashed once per set of
        # settings they depend on.
        given = (source.querier(), labels, options["hot_celsius"], options["idle_window"])
        kept = self._kept_keys
        if kept is not None and kept[0] == given:
            return kept[1]
        plan = Plan(
            raw=queries.node_figure_queries(labels, **options),
            recorded=queries.recorded_figure_queries(labels, **options),
        )
        key = source.cache_key(
            "node-figures",
            source.querier(),
            settings.DCGM_NODE_LABEL,
            sorted(plan.raw.items()),
            sorted(plan.recorded.items()),
        )
        self._kept_keys = (given, (key, plan))
        return key, plan

    def _stored(self, key: str) -> Entry | None:
        """The shared entry, if there is a current one (the memo spares the unpickling)."""
        version = cache.get(f"{key}:version")
        if version is None:
            return self._memo_without_cache()
        if self._memo is not None and self._memo[0] == version:
            return self._memo if _servable(self._memo) else None
        # One thread of the process loads a new entry, the others wait for it: each would
        # otherwise unpickle the same 5,000 tuples under the interpreter lock at once.
        with self._loading:
            if self._memo is not None and self._memo[0] == version:
                return self._memo if _servable(self._memo) else None
            entry = cache.get(key)
            if entry is None or entry[0] != version:
                return None
            self._memo = entry
            return entry if _servable(entry) else None

    def _memo_without_cache(self) -> Entry | None:
        """This process's last figures while the shared cache is unreachable, if still
        current: without them every page would ask Prometheus."""
        if guarded_cache.CACHE not in guarded_cache.degraded() or self._memo is None:
            return None
        return self._memo if _servable(self._memo) and self._memo[1] is None else None

    def _refresh(self, key: str, plan: Plan, *, in_turn: bool = False) -> Entry:
        started = time.monotonic()
        error, values, sources = _ask(key, plan, in_turn=in_turn)
        # How long a round takes is what METRICS_STALE_SECONDS must cover at scale.
        log.info(
            "node figures refreshed in %.1f s (%s)%s",
            time.monotonic() - started,
            "in turn" if in_turn else "at once",
            f": {error}" if error else "",
        )
        with collector_paused():  # a tuple a node: no cycle for the collector to find
            entry: Entry = (time.time(), error, node_metric_rows(values), sources)
        # Kept through the grace too: served late while the next round runs.
        ttl = settings.METRICS_CACHE_SECONDS + _stale_seconds()
        cache.set(key, entry, ttl)
        cache.set(f"{key}:version", entry[0], ttl)
        return entry

    def _refresh_once(self, key: str, plan: Plan) -> Entry:
        """Wait for whoever holds the refresh lock, or take it and refresh; within the
        request's one wait for Prometheus."""
        lock = f"{key}:refreshing"
        wait = source.time_left()
        if wait is None:
            return (time.time(), source.not_asked(), {}, {})  # not stored: the next page asks
        deadline = time.monotonic() + min(wait, _lock_seconds())
        while True:
            entry = self._stored(key)
            if entry is not None:
                return entry
            if cache.add(lock, 1, _lock_seconds()):
                try:
                    # Someone may have stored it between our look and our lock.
                    return self._stored(key) or self._refresh(key, plan)
                finally:
                    cache.delete(lock)
            if time.monotonic() >= deadline:
                if source.time_left() is None:  # this page's wait is over
                    return (time.time(), source.not_asked(), {}, {})
                return self._refresh(key, plan)  # the holder is gone or stuck
            time.sleep(WAIT_STEP_SECONDS)

    def _refresh_ahead(self, key: str, plan: Plan, *, in_turn: bool = True) -> None:
        # One refresh a process at a time, whatever the shared lock says: with the shared
        # cache unreachable its `add` always succeeds, and every request would start one.
        if not self._ahead.acquire(blocking=False):
            return
        lock = f"{key}:refreshing"
        if not cache.add(lock, 1, _ahead_lock_seconds(plan)):
            self._ahead.release()
            return  # someone in the deployment is on it
        # A new thread starts outside the request's context: it is told its cluster, or it
        # would ask the portal's own cluster's Prometheus and store that under this key.
        cluster = current_cluster()

        def run() -> None:
            try:
                with cluster_scope(cluster):
                    # Nobody waits for it: while the figures are in their life, the queries
                    # in turn, so that Prometheus, when it shares the portal's machine,
                    # leaves the requests a core.
                    self._memo = self._refresh(key, plan, in_turn=in_turn)
            finally:
                cache.delete(lock)
                self._ahead.release()

        threading.Thread(target=run, daemon=True, name="node-figures").start()

    def _entry(self) -> tuple[str, Entry]:
        key, plan = self._keys()
        entry = self._stored(key)
        observability.cache_lookup("node_figures", hit=entry is not None)
        if entry is None:
            entry = self._refresh_once(key, plan)
        elif (age := time.time() - entry[0]) > REFRESH_AHEAD_AT * settings.METRICS_CACHE_SECONDS:
            # Past their life (nobody asked in the last part of it) the figures are late:
            # the refresh asks at once, as a waiting page would, to end the grace soon.
            self._refresh_ahead(key, plan, in_turn=age <= settings.METRICS_CACHE_SECONDS)
        self._memo = entry
        return key, entry

    def get(self) -> tuple[InstantResult, Mapping[str, NodeMetrics]]:
        entry = self._entry()[1]
        return InstantResult(error=entry[1]), LazyNodeMetrics(entry[2])

    def get_versioned(self) -> tuple[InstantResult, Mapping[str, NodeMetrics], float]:
        """The figures, and their version: when they were made (an answer given up on
        without asking is never stored, and its version, now, is never seen again)."""
        entry = self._entry()[1]
        return InstantResult(error=entry[1]), LazyNodeMetrics(entry[2]), entry[0]

    def derived(
        self,
        name: str,
        version: object,
        compute: Callable[[InstantResult, Mapping[str, NodeMetrics]], Derived],
    ) -> tuple[InstantResult, Mapping[str, NodeMetrics], Derived]:
        """The node figures and `compute(result, metrics)`, kept in the shared cache (and
        this process) under the current entry's time and `version`: made again when either
        changes."""
        key, entry = self._entry()
        result, metrics = InstantResult(error=entry[1]), LazyNodeMetrics(entry[2])
        derived_key = f"{key}:{name}:{entry[0]!r}:{version}"
        memo = self._derived.get(name)
        if memo is not None and memo[0] == derived_key:
            return result, metrics, memo[1]
        value = cache.get(derived_key)
        if value is None:
            value = compute(result, metrics)
            cache.set(derived_key, value, settings.METRICS_CACHE_SECONDS)
        self._derived[name] = (derived_key, value)
        return result, metrics, value

    def sources(self) -> dict[str, str] | None:
        """Where the current figures came from, per figure (None: none fetched yet); asks
        Prometheus nothing."""
        entry = self._stored(self._keys()[0])
        # A copy: the entry is this process's memo, shared by every request.
        return dict(entry[3]) if entry is not None and entry[1] is None else None


# One per cluster: each keeps its own cluster's last entry in memory.
_by_cluster: dict[str, NodeFigureCache] = {}


def _figures() -> NodeFigureCache:
    cluster = current_cluster()
    found = _by_cluster.get(cluster)
    if found is None:
        found = _by_cluster.setdefault(cluster, NodeFigureCache())
    return found


def latest_node_metrics() -> tuple[InstantResult, Mapping[str, NodeMetrics]]:
    """Every node's current DCGM figures (by node name; a node absent has no DCGM series),
    and the result's error when Prometheus could not answer."""
    return _figures().get()


def latest_node_metrics_versioned() -> tuple[InstantResult, Mapping[str, NodeMetrics], float]:
    """As `latest_node_metrics`, with the version of the figures: it changes whenever the
    figures do, so what is made of them can be kept under it."""
    return _figures().get_versioned()


def derived_figures(
    name: str,
    version: object,
    compute: Callable[[InstantResult, Mapping[str, NodeMetrics]], Derived],
) -> tuple[InstantResult, Mapping[str, NodeMetrics], Derived]:
    """The current node figures (as latest_node_metrics), and figures made by `compute`
    from them and data at `version` (the caller's inventory version, read before its rows),
    cached with the node figures: the same entry and version answer from the cache without
    calling `compute`."""
    return _figures().derived(name, version, compute)


def figure_sources() -> dict[str, str] | None:
    """Where the current per-node figures came from ("recorded" or "raw", per figure), or
    None before any were fetched."""
    return _figures().sources()


def reads_recorded(figure: str) -> bool:
    """Whether the current figures read `figure` from a recorded series."""
    sources = figure_sources()
    return bool(sources) and sources.get(figure) == "recorded"  # type: ignore[union-attr]


def rules_loaded() -> bool | None:
    """Whether Prometheus has the portal's recording rules (their marker series); None
    when it cannot say. One small query, not cached: for /readyz."""
    result = source.instant({"rules": f"count({queries.RULES_LOADED})"}, use_cache=False)
    if not result.available:
        return None
    return bool(result.series.get("rules"))
