"""Building the API client from KUBECONFIG, in-cluster credentials, or nothing at all."""

from __future__ import annotations

import functools
import json

import urllib3
from django.conf import settings
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from pools.common.cluster_access import cluster_access
from pools.kube.errors import KubeError, KubeNotConfigured, KubeRefused, KubeUnavailable


def api_client() -> client.ApiClient:
    """The current cluster's ApiClient (pools.common.cluster_access): one per process and
    configuration, since it holds a connection pool."""
    access = cluster_access()
    return _api_client(access.in_cluster, access.kubeconfig, access.context)


def kube_configured() -> bool:
    """Whether this process has the current cluster to talk to (a kubeconfig or in-cluster
    credentials). The chart gives the web pods none: only the worker and the watcher call
    the API."""
    access = cluster_access()
    return bool(access.in_cluster or access.kubeconfig)


@functools.cache
def _api_client(in_cluster: bool, kubeconfig: str, context: str) -> client.ApiClient:
    configuration = client.Configuration()
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        elif kubeconfig:
            config.load_kube_config(
                config_file=kubeconfig, context=context or None, client_configuration=configuration
            )
        else:
            raise KubeNotConfigured(
                "no cluster configured: set KUBECONFIG to a kubeconfig file or KUBE_IN_CLUSTER=true"
            )
    except (ConfigException, OSError) as exc:
        raise KubeNotConfigured(f"Kubernetes client configuration is unusable: {exc}") from exc
    # urllib3 would otherwise retry some answers on its own (GETs answered 429/503 with
    # Retry-After): pools/kube/retry.py is the one retry policy, so counts stay honest.
    configuration.retries = False
    return client.ApiClient(configuration)


def translate(exc: Exception, *, doing: str) -> KubeError:
    """Turn a client exception into the project's own error, naming what was being done."""
    if isinstance(exc, ApiException):
        message = _status_message(exc)
        if exc.status in (429, 500, 502, 503, 504):
            return KubeUnavailable(f"{doing}: API server answered {exc.status}: {message}")
        return KubeRefused(
            f"{doing}: API server answered {exc.status} {exc.reason}: {message}",
            status=exc.status or 0,
            reason=_status_reason(exc),
        )
    if isinstance(exc, (urllib3.exceptions.HTTPError, OSError)):
        return KubeUnavailable(f"{doing}: API server unreachable: {exc}")
    if isinstance(exc, KubeError):
        return exc
    raise exc


def kube_version() -> str:
    """The API server's version, asked with the configured timeout (readiness check)."""
    try:
        info = client.VersionApi(api_client()).get_code(_request_timeout=settings.KUBE_TIMEOUT)
    except KubeError:
        raise
    except Exception as exc:
        raise translate(exc, doing="reading the API server version") from exc
    return str(info.git_version)


def _status_body(exc: ApiException) -> dict[str, object]:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _status_message(exc: ApiException) -> str:
    return str(_status_body(exc).get("message") or exc.reason or "no message")


def _status_reason(exc: ApiException) -> str:
    return str(_status_body(exc).get("reason") or "")
