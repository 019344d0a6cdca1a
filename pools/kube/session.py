"""Reading and patching nodes over the official client's connection pool, without the
official client's per-call work.

Through the generated client, each node call costs about as much CPU in Python as the HTTP
exchange itself: its arguments validated by pydantic, its parameters serialised, and its
credentials refreshed — the refresh re-applies the kubeconfig, which looks the proxy up in
the whole environment again. A move sends hundreds of these calls from one process, so its
hot path (a chunk's LIST, each node's GET and PATCH) goes straight to the pool the client
built: the same TLS (CA, client certificate, server name, verification), proxy and
keep-alive connections, and the same credentials (read through the client's configuration,
so an exec plugin or an in-cluster token is refreshed the client's way), read again every
CREDENTIALS_SECONDS and after a 401. Answers other than 2xx raise the client's own
ApiException, so the callers' handling (409 re-read, the retry policy's 429/5xx backoff and
Retry-After) is unchanged.
"""

from __future__ import annotations

import functools
import json
import ssl
import threading
import time
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import urllib3
from django.conf import settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pools.kube.client import api_client
from pools.kube.direct import Answer, direct_pool

Raw = dict[str, Any]
# Credentials are read again this often: a token mounted in a pod is rotated, an exec
# plugin's expires; a 401 reads them again at once.
CREDENTIALS_SECONDS = 10.0
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class NodeSession:
    """GET, LIST and PATCH of nodes for one API client (one per process and configuration)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.configuration = api.configuration
        self.manager = api.rest_client.pool_manager
        host = api.configuration.host
        self.url, self.base_path = f"{host}/api/v1/nodes", f"{urlsplit(host).path}/api/v1/nodes"
        # Without a proxy every request goes to the one pool the manager keeps for the API
        # server (its TLS settings): asked directly, without the manager's per-request URL
        # parsing and pool lookup. Through a proxy, the manager decides how each one goes.
        self.pool = (
            self.manager.connection_from_url(host)
            if type(self.manager) is urllib3.PoolManager
            else None
        )
        # The plain case (pools/kube/direct.py): connections of our own, without urllib3.
        self.direct = direct_pool(self.pool) if self.pool is not None else None
        self.default_headers = dict(api.default_headers)
        self.lock = threading.Lock()
        self.headers: dict[str, str] = {}
        self.read_at = -CREDENTIALS_SECONDS

    def read(self, name: str) -> Raw:
        return self._send("GET", f"/{quote(name, safe='')}")

    def patch(self, name: str, body: dict[str, Any], content_type: str = STRATEGIC_MERGE) -> Raw:
        return self._send(
            "PATCH", f"/{quote(name, safe='')}", json.dumps(body).encode(), content_type
        )

    def list_page(self, label_selector: str, limit: int, token: str | None = None) -> Raw:
        """One page of the nodes `label_selector` selects (a NodeList)."""
        query = {"labelSelector": label_selector, "limit": str(limit)}
        return self._send(
            "GET", f"?{urlencode({**query, **({'continue': token} if token else {})})}"
        )

    def _send(
        self, method: str, path: str, body: bytes | None = None, content_type: str = ""
    ) -> Raw:
        response = self._exchange(method, path, body, content_type, self._credentials())
        if response.status == 401:
            response = self._exchange(method, path, body, content_type, self._credentials(True))
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response)
        return json.loads(response.data)

    def _exchange(
        self, method: str, path: str, body: bytes | None, content_type: str, headers: dict[str, str]
    ) -> urllib3.BaseHTTPResponse | Answer:
        if content_type:
            headers = {**headers, "Content-Type": content_type}
        if self.direct is not None:
            try:
                return self.direct.request(
                    method, self.base_path + path, body, headers, settings.KUBE_TIMEOUT
                )
            except ssl.SSLError as exc:
                # What urllib3 makes of it (its SSLError), and the same refusal.
                raise ApiException(status=0, reason=f"SSLError: {exc}") from exc
        options: dict[str, Any] = {
            "body": body,
            "headers": headers,
            "timeout": urllib3.Timeout(total=settings.KUBE_TIMEOUT),
            "retries": False,  # pools/kube/retry.py is the one retry policy
            "redirect": False,
        }
        try:
            if self.pool is None:
                return self.manager.urlopen(method, self.url + path, **options)
            return self.pool.urlopen(method, self.base_path + path, **options)
        except urllib3.exceptions.SSLError as exc:
            # As the official client does: a TLS failure is a refusal, not worth retrying.
            raise ApiException(status=0, reason=f"{type(exc).__name__}: {exc}") from exc

    def _credentials(self, again: bool = False) -> dict[str, str]:
        with self.lock:
            if again or time.monotonic() - self.read_at >= CREDENTIALS_SECONDS:
                headers = {**self.default_headers, "Accept": "application/json"}
                for auth in self.configuration.auth_settings().values():
                    if auth["in"] == "header":
                        headers[auth["key"]] = auth["value"]
                self.headers, self.read_at = headers, time.monotonic()
            return self.headers


def node_session() -> NodeSession:
    return _node_session(api_client())


@functools.cache
def _node_session(api: client.ApiClient) -> NodeSession:
    return NodeSession(api)
