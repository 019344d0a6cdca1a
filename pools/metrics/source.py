"""Talking to Prometheus through prometheus-api-client: timeouts, a short cache, no hidden
retries, and a result that says what is missing instead of raising into a page."""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime, timedelta
from typing import Any

import requests
from django.conf import settings
from django.core.cache import cache
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from pools import observability
from pools.core.redact import redact_url
from pools.metrics.results import InstantResult, RangeResult, RangeSeries, Sample

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


def prometheus() -> PrometheusConnect:
    if not settings.PROMETHEUS_URL:
        raise MetricsError("PROMETHEUS_URL is not set")
    return _connect(settings.PROMETHEUS_URL.rstrip("/"), settings.PROMETHEUS_TIMEOUT)


@functools.cache
def _connect(url: str, timeout: float) -> PrometheusConnect:
    # The library retries with backoff by default; a page must answer within its timeout,
    # so a failure is reported at once and the page says metrics are unavailable.
    return PrometheusConnect(url=url, timeout=timeout, retry=Retry(total=0))


def prometheus_ready() -> None:
    """Raise MetricsError unless Prometheus answers."""
    try:
        ready = prometheus().check_prometheus_connection()
    except requests.RequestException as exc:
        raise MetricsError(f"Prometheus unreachable at {settings.PROMETHEUS_URL}: {exc}") from exc
    if not ready:
        raise MetricsError(f"Prometheus at {settings.PROMETHEUS_URL} answered an error")


def _describe(exc: Exception) -> str:
    """What a page shows for a failed query, without a password from PROMETHEUS_URL."""
    return redact_url(_explain(exc))


def _explain(exc: Exception) -> str:
    if isinstance(exc, requests.Timeout):
        return f"Prometheus did not answer within {settings.PROMETHEUS_TIMEOUT:g}s"
    if isinstance(exc, requests.ConnectionError):
        return f"Prometheus unreachable at {settings.PROMETHEUS_URL}"
    if isinstance(exc, PrometheusApiClientException):
        return f"Prometheus answered an error: {exc}"
    return str(exc)


def cache_key(kind: str, *parts: object) -> str:
    digest = hashlib.sha256(repr(parts).encode()).hexdigest()
    return f"metrics:{kind}:{digest}"


def _run_instant(promql: str) -> list[Sample]:
    server_timeout = f"{settings.PROMETHEUS_TIMEOUT:g}s"
    raw = observability.promql_sent(
        "instant", prometheus().custom_query, promql, params={"timeout": server_timeout}
    )
    return [Sample(item.get("metric", {}), float(item["value"][1])) for item in raw]


def instant(queries: Mapping[str, str], *, use_cache: bool = True) -> InstantResult:
    """Run named instant queries in parallel, within one timeout, through the cache (a caller
    that caches a smaller derived form of the result passes use_cache=False)."""
    if not settings.PROMETHEUS_URL:
        return InstantResult(error="PROMETHEUS_URL is not set")
    key = cache_key("instant", settings.PROMETHEUS_URL, sorted(queries.items()))
    cached = cache.get(key) if use_cache else None
    if use_cache:
        observability.cache_lookup("instant", hit=cached is not None)
    if cached is not None:
        return cached
    futures = {name: _POOL.submit(_run_instant, q) for name, q in queries.items()}
    deadline = time.monotonic() + settings.PROMETHEUS_TIMEOUT + 0.5
    series: dict[str, list[Sample]] = {}
    error = None
    for name, future in futures.items():
        try:
            series[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            error = f"Prometheus did not answer within {settings.PROMETHEUS_TIMEOUT:g}s"
        except QUERY_FAILURES as exc:
            error = _describe(exc)
        if error:
            for other in futures.values():
                other.cancel()
            break
    result = InstantResult(error=error) if error else InstantResult(series)
    if use_cache:
        cache.set(key, result, settings.METRICS_CACHE_SECONDS)
    return result


def history(
    promql: str, *, span: timedelta, step: timedelta, now: datetime | None = None
) -> RangeResult:
    if not settings.PROMETHEUS_URL:
        return RangeResult(error="PROMETHEUS_URL is not set")
    end = now or datetime.now().astimezone()
    key = cache_key("range", settings.PROMETHEUS_URL, promql, span, step)
    cached = cache.get(key)
    observability.cache_lookup("range", hit=cached is not None)
    if cached is not None:
        return cached
    try:
        raw: list[dict[str, Any]] = observability.promql_sent(
            "range",
            prometheus().custom_query_range,
            promql,
            start_time=end - span,
            end_time=end,
            step=f"{int(step.total_seconds())}s",
            params={"timeout": f"{settings.PROMETHEUS_TIMEOUT:g}s"},
        )
        points = [(float(t), float(v)) for t, v in raw[0]["values"]] if raw else []
        result = RangeResult(points)
    except QUERY_FAILURES as exc:
        result = RangeResult(error=_describe(exc))
    cache.set(key, result, settings.METRICS_CACHE_SECONDS)
    return result


def history_series(
    promql: str, *, span: timedelta, step: timedelta, now: datetime | None = None
) -> RangeSeries:
    """Every series of a range query (history() keeps the first only), through the cache."""
    if not settings.PROMETHEUS_URL:
        return RangeSeries(error="PROMETHEUS_URL is not set")
    end = now or datetime.now().astimezone()
    key = cache_key("range-series", settings.PROMETHEUS_URL, promql, span, step)
    cached = cache.get(key)
    observability.cache_lookup("range", hit=cached is not None)
    if cached is not None:
        return cached
    try:
        raw: list[dict[str, Any]] = observability.promql_sent(
            "range",
            prometheus().custom_query_range,
            promql,
            start_time=end - span,
            end_time=end,
            step=f"{int(step.total_seconds())}s",
            params={"timeout": f"{settings.PROMETHEUS_TIMEOUT:g}s"},
        )
        result = RangeSeries(
            [
                (item.get("metric", {}), [(float(t), float(v)) for t, v in item["values"]])
                for item in raw
            ]
        )
    except QUERY_FAILURES as exc:
        result = RangeSeries(error=_describe(exc))
    cache.set(key, result, settings.METRICS_CACHE_SECONDS)
    return result
