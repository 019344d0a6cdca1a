"""The portal's own metrics: every instrument, and the one-line calls the edges make.

The edges (pools/kube/, pools/metrics/, the execution and the inventory) call the small
functions below; nothing else in the project creates a Prometheus instrument. Figures the
database or Redis already hold (moves by state, the Celery queue's length) are not kept
here: portal/metrics_view.py reads them when Prometheus scrapes.

Under gunicorn and Celery each process counts in its own files in PROMETHEUS_MULTIPROC_DIR
(prometheus-client's multiprocess mode, chosen when that variable is set before the first
import of prometheus_client); /metrics adds the files up. A gauge there keeps the most
recent value any process set. Every instrument has labels, so none opens a file before it
is first used: a process may empty the directory after importing this module (the watcher
does, as it starts) without losing a figure it holds open.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import ParamSpec, TypeVar

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

P = ParamSpec("P")
T = TypeVar("T")

# A process that records into a directory that does not exist fails at its first figure;
# the directory lives on an emptyDir (or /tmp) that nobody created beforehand.
if _multiproc_dir := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.makedirs(_multiproc_dir, exist_ok=True)

# The *_created series say when a series was first seen: the multiprocess mode never sends
# them, so a single process does not either, and the two answer alike.
disable_created_metrics()

HTTP_REQUEST_SECONDS = Histogram(
    "portal_http_request_duration_seconds",
    "Time to answer an HTTP request, by view (route name), method and status class.",
    ["view", "method", "status"],
)
MOVE_SECONDS = Histogram(
    "portal_move_duration_seconds",
    "Time from a move's approval to its end, by how it ended.",
    ["outcome"],
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, float("inf")),
)
KUBE_PATCHES = Counter(
    "portal_kube_patch_requests_total",
    "PATCH requests sent to the Kubernetes API (labels, taints, cordon), by outcome and "
    "HTTP status code (none: no answer).",
    ["outcome", "code"],
)
KUBE_RETRIES = Counter(
    "portal_kube_retries_total",
    "Kubernetes API calls tried again after a transient failure, by what failed.",
    ["reason"],
)
INVENTORY_SYNC_SECONDS = Histogram(
    "portal_inventory_sync_duration_seconds",
    "Time a full inventory sync (list every node and pod, write the rows) took.",
    ["outcome"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, float("inf")),
)
INVENTORY_SYNCED_AT = Gauge(
    "portal_inventory_last_sync_timestamp_seconds",
    "When a full inventory sync last ended (Unix time), by outcome (ok or failed).",
    ["outcome"],
    multiprocess_mode="mostrecent",
)
WATCH_LAG = Gauge(
    "portal_inventory_watch_lag_seconds",
    "How far the inventory watch is behind the cluster: the age of the last change it "
    "applied, by resource (nodes, pods).",
    ["resource"],
    multiprocess_mode="mostrecent",
)
PROMQL_SECONDS = Histogram(
    "portal_prometheus_query_duration_seconds",
    "Time a PromQL query to Prometheus took, answered or not, by kind (instant or range).",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, float("inf")),
)
PROMQL_FAILURES = Counter(
    "portal_prometheus_query_failures_total",
    "PromQL queries that failed, by kind and the error's type (ReadTimeout, ConnectionError, "
    "PrometheusApiClientException, ...).",
    ["kind", "error"],
)
CACHE_LOOKUPS = Counter(
    "portal_metrics_cache_lookups_total",
    "Lookups in the cache of Prometheus answers, by cache and result (hit or miss).",
    ["cache", "result"],
)

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def request_observe(*, view: str, method: str, status: int, seconds: float) -> None:
    """One answered HTTP request. The status is kept as its class (2xx, 4xx) and an unusual
    method as "other", so no client can grow the number of series."""
    method = method if method in _METHODS else "other"
    HTTP_REQUEST_SECONDS.labels(view, method, f"{status // 100}xx").observe(seconds)


def move_finished(*, outcome: str, approved_at: datetime | None, ended_at: datetime) -> None:
    """A move ended (succeeded, failed, partially failed), `approved_at` its last approval."""
    if approved_at is not None:
        MOVE_SECONDS.labels(outcome).observe(max(0.0, (ended_at - approved_at).total_seconds()))


def _patch_outcome(status: int | None) -> str:
    if status is None:
        return "unreachable"
    if status == 409:
        return "conflict"
    if status == 429 or status >= 500:
        return "unavailable"
    return "refused" if status >= 400 else "ok"


@contextlib.contextmanager
def kube_patch() -> Iterator[None]:
    """Around one PATCH request: counts its answer, or the error it raised (an
    ApiException's `status`; anything without one got no answer)."""
    try:
        yield
    except Exception as exc:
        status = getattr(exc, "status", None)
        status = status if isinstance(status, int) and status > 0 else None
        KUBE_PATCHES.labels(_patch_outcome(status), str(status or "none")).inc()
        raise
    KUBE_PATCHES.labels("ok", "200").inc()


def kube_patch_sent(send: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Send one PATCH through `send` (the node session's patch), counted."""
    with kube_patch():
        return send(*args, **kwargs)


def kube_retry(exc: BaseException) -> None:
    """A Kubernetes call about to be tried again after `exc`."""
    status = getattr(exc, "status", None)
    KUBE_RETRIES.labels(str(status) if isinstance(status, int) and status else "unreachable").inc()


def inventory_sync_timed(sync: Callable[P, T]) -> Callable[P, T]:
    """Decorates the full sync: its duration, whether it failed, when it last succeeded."""

    @functools.wraps(sync)
    def timed(*args: P.args, **kwargs: P.kwargs) -> T:
        started = time.perf_counter()
        outcome = "failed"
        try:
            result = sync(*args, **kwargs)
            outcome = "ok"
            return result
        finally:
            INVENTORY_SYNC_SECONDS.labels(outcome).observe(time.perf_counter() - started)
            INVENTORY_SYNCED_AT.labels(outcome).set(time.time())

    return timed


def watch_lag_set(seconds: float, *, resource: str = "nodes") -> None:
    """For the inventory watch: how old the last change to `resource` (nodes or pods) it
    applied was when it applied it."""
    WATCH_LAG.labels(resource).set(max(0.0, seconds))


def promql_sent(kind: str, send: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Send one query to Prometheus through `send` (`kind`: instant or range), timed, and
    counted as failed when it raises."""
    started = time.perf_counter()
    try:
        return send(*args, **kwargs)
    except Exception as exc:
        PROMQL_FAILURES.labels(kind, type(exc).__name__).inc()
        raise
    finally:
        PROMQL_SECONDS.labels(kind).observe(time.perf_counter() - started)


def cache_lookup(cache: str, *, hit: bool) -> None:
    CACHE_LOOKUPS.labels(cache, "hit" if hit else "miss").inc()
