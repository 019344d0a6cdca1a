"""Talking to Prometheus through prometheus-api-client: timeouts, a short cache, no hidden
retries, and a result that says what is missing instead of raising into a page.

A page waits for Prometheus at most PROMETHEUS_TIMEOUT in total, however many queries it
asks in turn (`one_wait`, opened per request by the web middleware): the clock starts
with the page's first query, each query gets the time left, and once that is spent the
page's remaining queries are not sent and their panels say why.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any, TypeVar

import requests
import urllib3
from django.conf import settings
from django.core.cache import cache
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from pools.common import observability
from pools.common.cluster_access import current_cluster, prometheus_access
from pools.core.cluster_scope import cluster_scope
from pools.core.gc_pause import collector_paused
from pools.core.redact import redact_url
from pools.metrics import queries
from pools.metrics.http import adapter as http_adapter
from pools.metrics.http import prometheus_session
from pools.metrics.results import InstantResult, RangeResult, RangeSeries, Sample
from pools.metrics.scope import selecting
from pools.metrics.vectors import NodeValue, node_vector_values

Answer = TypeVar("Answer")
_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="promql")


class MetricsError(Exception):
    """Prometheus is not configured, down, slow, or answered an error."""


# What a query can meet: Prometheus down or slow, an error answer, an answer not shaped as
# expected. Anything else is a bug and should surface.
QUERY_FAILURES = (
    requests.RequestException,
    PrometheusApiClientException,
    MetricsError,
    ValueError,
    KeyError,
)


class _Wait:
    """One request's time for Prometheus: a deadline set by its first query."""

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.spent: str | None = None  # why later queries are not sent


_wait: ContextVar[_Wait | None] = ContextVar("prometheus_wait", default=None)


@contextlib.contextmanager
def one_wait() -> Iterator[None]:
    """Every query inside shares one PROMETHEUS_TIMEOUT (a page, an API call)."""
    token = _wait.set(_Wait())
    try:
        yield
    finally:
        _wait.reset(token)


def _timed_out() -> str:
    return f"Prometheus did not answer within {settings.PROMETHEUS_TIMEOUT:g}s"


def time_left() -> float | None:
    """Seconds this query may wait, or None when the request's time is spent (do not ask).
    Outside `one_wait` (a task, a shell) each query has its own PROMETHEUS_TIMEOUT."""
    wait = _wait.get()
    if wait is None:
        return settings.PROMETHEUS_TIMEOUT
    now = time.monotonic()
    if wait.deadline is None:
        wait.deadline = now + settings.PROMETHEUS_TIMEOUT
    left = wait.deadline - now
    if wait.spent is not None or left <= 0.05:
        wait.spent = wait.spent or _timed_out()
        return None
    return left


def time_spent(reason: str | None = None) -> None:
    """The request's wait is over (a query timed out): later queries are not sent."""
    wait = _wait.get()
    if wait is not None:
        wait.spent = reason or _timed_out()


def not_asked() -> str:
    """What a panel says when its query was not sent because the page's time was spent."""
    wait = _wait.get()
    reason = wait.spent if wait is not None and wait.spent else _timed_out()
    return f"not asked: {reason} earlier on this page"


def _url() -> str:
    """The current cluster's Prometheus (pools.common.cluster_access); "" when none."""
    return prometheus_access().url.rstrip("/")


def prometheus() -> PrometheusConnect:
    if not (url := _url()):
        raise MetricsError("PROMETHEUS_URL is not set")
    return _connect(prometheus_session(), url, settings.PROMETHEUS_TIMEOUT)


@functools.cache
def _connect(session: requests.Session, url: str, timeout: float) -> PrometheusConnect:
    # The library retries with backoff by default; a page must answer within its timeout,
    # so a failure is reported at once and the page says metrics are unavailable. The
    # session carries the authentication, TLS and headers (pools.metrics.http).
    client = PrometheusConnect(url=url, timeout=timeout, retry=Retry(total=0), session=session)
    session.mount(url, http_adapter())  # the library's own adapter keeps ten connections
    return client


def prometheus_ready() -> None:
    """Raise MetricsError unless Prometheus answers."""
    try:
        response = prometheus_session().get(f"{_url()}/", timeout=settings.PROMETHEUS_TIMEOUT)
    except requests.RequestException as exc:
        raise MetricsError(f"{_explain(exc)}: {exc}") from exc
    if not response.ok:
        raise MetricsError(_refused(response.status_code, response.content))


def _describe(exc: Exception) -> str:
    """What a page shows for a failed query, without a password from PROMETHEUS_URL."""
    return redact_url(_explain(exc))


def _is_timeout(exc: Exception) -> bool:
    """A timeout, also when requests reports it as a connection error: with retries off,
    urllib3 wraps a read timeout in MaxRetryError, which requests calls ConnectionError."""
    if isinstance(exc, requests.Timeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    # urllib3's NewConnectionError (refused) is a ConnectTimeoutError for old callers' sake.
    return isinstance(reason, urllib3.exceptions.TimeoutError) and not isinstance(
        reason, urllib3.exceptions.NewConnectionError
    )


def _explain(exc: Exception) -> str:
    if _is_timeout(exc):
        return _timed_out()
    if isinstance(exc, requests.exceptions.SSLError):
        return (
            f"TLS with Prometheus at {_url()} failed (check "
            f"PROMETHEUS_CA_BUNDLE and PROMETHEUS_CLIENT_CERT): {_ssl_reason(exc)}"
        )
    if isinstance(exc, requests.ConnectionError):
        return f"Prometheus unreachable at {_url()}"
    if isinstance(exc, PrometheusApiClientException):
        status = re.match(r"HTTP Status Code (\d+)", str(exc))
        if status and int(status.group(1)) in (401, 403):
            return _refused(int(status.group(1)), b"")
        return f"Prometheus answered an error: {exc}"
    return str(exc)


def _ssl_reason(exc: Exception) -> str:
    """The TLS library's own words (certificate verify failed, …), without urllib3's
    wrapping of the whole URL."""
    found = re.search(r"\[SSL[^\]]*\][^')\]]*", str(exc))
    return found.group(0).strip() if found else str(exc)


def _refused(status: int, content: bytes) -> str:
    if status in (401, 403):
        return (
            f"Prometheus at {_url()} refused the portal's credentials "
            f"(HTTP {status}): check PROMETHEUS_BEARER_TOKEN (or its _FILE), or "
            "PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD"
        )
    return f"Prometheus at {_url()} answered HTTP {status}: {content[:200]!r}"


def querier() -> tuple[str | None, str, str]:
    """Where the queries go, and whose series they select there: part of every cache key,
    so that the portals of two clusters sharing a querier and a cache never share answers."""
    access = prometheus_access()
    return (access.url or None, access.cluster_label, access.cluster_value)


def scoped(promql: str) -> str:
    """`promql` as sent: on a querier holding several clusters (PROMETHEUS_CLUSTER_LABEL), its
    every selector narrowed to this portal's cluster. Callers write their queries for one
    cluster; this is the one place they are narrowed, just before they are sent."""
    access = prometheus_access()
    label = access.cluster_label
    return selecting(promql, label, access.cluster_value) if label else promql


def cache_key(kind: str, *parts: object) -> str:
    digest = hashlib.sha256(repr((querier(), parts)).encode()).hexdigest()
    return f"metrics:{kind}:{digest}"


def _run_instant(promql: str, wait: float) -> list[Sample]:
    raw = observability.promql_sent(
        "instant",
        prometheus().custom_query,
        scoped(promql),
        params={"timeout": f"{wait:.3f}"},
        timeout=wait,
    )
    return [Sample(item.get("metric", {}), float(item["value"][1])) for item in raw]


def _instant_body(promql: str, wait: float) -> bytes:
    """Prometheus' answer to an instant query, undecoded; a non-200 answer raises as
    prometheus-api-client's would, so that pages say the same."""
    if not (url := _url()):
        raise MetricsError("PROMETHEUS_URL is not set")
    # The same session as prometheus-api-client's: one pool, one authentication.
    response = prometheus_session().get(
        f"{url}/api/v1/query",
        params={"query": scoped(promql), "timeout": f"{wait:.3f}"},
        timeout=wait,
    )
    if response.status_code != 200:
        raise PrometheusApiClientException(
            f"HTTP Status Code {response.status_code} ({response.content!r})"
        )
    return response.content


def _run_node_values(promql: str, wait: float, node_label: str) -> list[NodeValue]:
    body = observability.promql_sent("instant", _instant_body, promql, wait)
    with collector_paused():
        return node_vector_values(body, node_label)


def instant_node_values(
    queries: Mapping[str, str], node_label: str, *, in_turn: bool = False
) -> tuple[dict[str, list[NodeValue]], str | None]:
    """Named instant queries in parallel within the request's one wait, or `in_turn` one
    after another (a refresh nobody waits for: Prometheus then takes one core at a time,
    not every core of a machine it may share with the portal), each answer as (node,
    value) pairs by `node_label` (pools.metrics.vectors), uncached; or the reason there
    are none."""
    if not _url():
        return {}, "PROMETHEUS_URL is not set"
    wait = time_left()
    if wait is None:
        return {}, not_asked()
    run = functools.partial(_run_node_values, node_label=node_label)
    return _in_turn(queries, wait, run) if in_turn else _gather(queries, wait, run)


def _in_turn(
    queries: Mapping[str, str], wait: float, run: Callable[[str, float], Answer]
) -> tuple[dict[str, Answer], str | None]:
    """Each query after the last, all within `wait` seconds; the first failure is the
    answer."""
    deadline = time.monotonic() + wait
    answers: dict[str, Answer] = {}
    for name, promql in queries.items():
        left = deadline - time.monotonic()
        if left <= 0.05:
            return answers, _timed_out()
        try:
            answers[name] = run(promql, left)
        except QUERY_FAILURES as exc:
            if _is_timeout(exc):
                time_spent()
            return answers, _describe(exc)
    return answers, None


def instant(queries: Mapping[str, str], *, use_cache: bool = True) -> InstantResult:
    """Run named instant queries in parallel, within one timeout, through the cache (a caller
    that caches a smaller derived form of the result passes use_cache=False)."""
    if not _url():
        return InstantResult(error="PROMETHEUS_URL is not set")
    key = cache_key("instant", _url(), sorted(queries.items()))
    cached = cache.get(key) if use_cache else None
    if use_cache:
        observability.cache_lookup("instant", hit=cached is not None)
    if cached is not None:
        return cached
    wait = time_left()
    if wait is None:
        return InstantResult(error=not_asked())  # not cached: the next page may ask
    series, error = _gather(queries, wait, _run_instant)
    result = InstantResult(error=error) if error else InstantResult(series)
    if use_cache:
        cache.set(key, result, settings.METRICS_CACHE_SECONDS)
    return result


def _gather(
    queries: Mapping[str, str],
    wait: float,
    run: Callable[[str, float], Answer],
) -> tuple[dict[str, Answer], str | None]:
    """Every query at once, through `run`, all within `wait` seconds; the first failure is
    the answer."""
    # The pool's threads do not inherit the caller's context: each query is asked of the
    # caller's cluster explicitly.
    cluster = current_cluster()

    def in_cluster(promql: str, seconds: float) -> Answer:
        with cluster_scope(cluster):
            return run(promql, seconds)

    futures = {name: _POOL.submit(in_cluster, q, wait) for name, q in queries.items()}
    deadline = time.monotonic() + wait
    series: dict[str, Answer] = {}
    error = None
    for name, future in futures.items():
        try:
            # A little over `wait`: the HTTP timeout fires first and says what happened.
            series[name] = future.result(timeout=max(0.0, deadline - time.monotonic()) + 0.2)
        except FutureTimeout:
            error = _timed_out()
            time_spent()
        except QUERY_FAILURES as exc:
            error = _describe(exc)
            if _is_timeout(exc):
                time_spent()
        if error:
            for other in futures.values():
                other.cancel()
            break
    return series, error


def _range_result(raw: list[dict[str, Any]], by: str | None) -> RangeResult:
    def line(series: dict[str, Any]) -> list[tuple[float, float]]:
        return [(float(t), float(v)) for t, v in series["values"]]

    if by is None:
        return RangeResult(line(raw[0]) if raw else [])
    if by == queries.DEVICE:
        return RangeResult(series={queries.device_name(r["metric"]): line(r) for r in raw})
    return RangeResult(series={str(r["metric"].get(by, "")): line(r) for r in raw})


def history(
    promql: str,
    *,
    span: timedelta,
    step: timedelta,
    now: datetime | None = None,
    by: str | None = None,
) -> RangeResult:
    """The query's first series as `points`, or with `by`, every series by that label's value
    (queries.DEVICE: by GPU and MIG instance; one query either way)."""
    if not _url():
        return RangeResult(error="PROMETHEUS_URL is not set")
    end = now or datetime.now().astimezone()
    # A range that ends at a given moment is another answer than the one ending now.
    key = cache_key("range", _url(), promql, span, step, by, now)
    cached = cache.get(key)
    observability.cache_lookup("range", hit=cached is not None)
    if cached is not None:
        return cached
    wait = time_left()
    if wait is None:
        return RangeResult(error=not_asked())  # not cached: the next page may ask
    try:
        raw: list[dict[str, Any]] = observability.promql_sent(
            "range",
            prometheus().custom_query_range,
            scoped(promql),
            start_time=end - span,
            end_time=end,
            step=f"{int(step.total_seconds())}s",
            params={"timeout": f"{wait:.3f}"},
            timeout=wait,
        )
        result = _range_result(raw, by)
    except QUERY_FAILURES as exc:
        if _is_timeout(exc):
            time_spent()
        result = RangeResult(error=_describe(exc))
    cache.set(key, result, settings.METRICS_CACHE_SECONDS)
    return result


def history_series(
    promql: str, *, span: timedelta, step: timedelta, now: datetime | None = None
) -> RangeSeries:
    """Every series of a range query (history() keeps the first only), through the cache."""
    if not _url():
        return RangeSeries(error="PROMETHEUS_URL is not set")
    end = now or datetime.now().astimezone()
    # A range that ends at a given moment is another answer than the one ending now.
    key = cache_key("range-series", _url(), promql, span, step, now)
    cached = cache.get(key)
    observability.cache_lookup("range", hit=cached is not None)
    if cached is not None:
        return cached
    wait = time_left()
    if wait is None:
        return RangeSeries(error=not_asked())  # not cached: the next page may ask
    try:
        raw: list[dict[str, Any]] = observability.promql_sent(
            "range",
            prometheus().custom_query_range,
            scoped(promql),
            start_time=end - span,
            end_time=end,
            step=f"{int(step.total_seconds())}s",
            params={"timeout": f"{wait:.3f}"},
            timeout=wait,
        )
        result = RangeSeries(
            [
                (item.get("metric", {}), [(float(t), float(v)) for t, v in item["values"]])
                for item in raw
            ]
        )
    except QUERY_FAILURES as exc:
        if _is_timeout(exc):
            time_spent()
        result = RangeSeries(error=_describe(exc))
    cache.set(key, result, settings.METRICS_CACHE_SECONDS)
    return result
