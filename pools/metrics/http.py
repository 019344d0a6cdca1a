"""The one HTTP session to Prometheus: its authentication (a bearer token, or basic auth),
its TLS (a CA bundle, a client certificate) and extra headers (X-Scope-OrgID for Mimir,
Cortex and Thanos tenancy), from the PROMETHEUS_* settings. Every query the portal sends,
through prometheus-api-client or decoded here, goes through it; none is retried (a page's
timeout is its answer)."""

from __future__ import annotations

import functools
import os
import threading

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from pools.common.cluster_access import prometheus_access

# Queries a page sends at once (pools.metrics.source's thread pool).
POOL_SIZE = 16


class BearerToken(requests.auth.AuthBase):
    """`Authorization: Bearer …`, from a value or a file. The file is read again when it
    changes: a projected or rotated token is used from its next request on."""

    def __init__(self, value: str, path: str) -> None:
        self._value, self._path = value, path
        self._seen: tuple[int, int] | None = None
        self._lock = threading.Lock()

    def token(self) -> str:
        if not self._path:
            return self._value
        try:
            stat = os.stat(self._path)
        except OSError as exc:
            raise requests.RequestException(
                f"PROMETHEUS_BEARER_TOKEN_FILE: cannot read {self._path}: {exc.strerror}"
            ) from None
        with self._lock:
            if self._seen != (stat.st_mtime_ns, stat.st_size):
                with open(self._path, encoding="utf-8") as file:
                    self._value = file.read().strip()
                self._seen = (stat.st_mtime_ns, stat.st_size)
            return self._value

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        return request


def _options() -> tuple[object, ...]:
    access = prometheus_access()
    return (
        access.url.rstrip("/"),
        access.bearer_token,
        access.bearer_token_file,
        access.username,
        access.password,
        access.ca_bundle,
        access.client_cert,
        access.client_key,
        access.headers,
    )


def prometheus_session() -> requests.Session:
    """The keep-alive session for the current cluster's Prometheus (one per process and
    access: pools.common.cluster_access)."""
    return _session(*_options())


def adapter() -> HTTPAdapter:
    return HTTPAdapter(max_retries=Retry(total=0), pool_maxsize=POOL_SIZE)


@functools.cache
def _session(
    url: str,
    token: str,
    token_file: str,
    username: str,
    password: str,
    ca_bundle: str,
    client_cert: str,
    client_key: str,
    headers: tuple[tuple[str, str], ...],
) -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # no ~/.netrc password, no proxy the settings do not name
    session.mount("http://", adapter())
    session.mount("https://", adapter())
    if token or token_file:
        session.auth = BearerToken(token, token_file)
    elif username:
        session.auth = requests.auth.HTTPBasicAuth(username, password)
    if ca_bundle:
        session.verify = ca_bundle
    if client_cert:
        session.cert = (client_cert, client_key) if client_key else client_cert
    session.headers.update(dict(headers))
    return session
