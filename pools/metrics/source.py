"""Talking to Prometheus through prometheus-api-client, with timeouts and no hidden retries."""

from __future__ import annotations

import functools

import requests
from django.conf import settings
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry


class MetricsError(Exception):
    """Prometheus is not configured, down, slow, or answered an error."""


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
    """Raise MetricsError unless Prometheus answers its readiness endpoint."""
    try:
        ready = prometheus().check_prometheus_connection()
    except requests.RequestException as exc:
        raise MetricsError(f"Prometheus unreachable at {settings.PROMETHEUS_URL}: {exc}") from exc
    if not ready:
        raise MetricsError(f"Prometheus at {settings.PROMETHEUS_URL} answered an error")
