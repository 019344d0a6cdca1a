"""Keep-alive connections of our own (http.client) to the API server, for a move's hot calls.

urllib3 costs about as much CPU again as http.client under it for each request (its header
checks, its response object and decoders, its per-request timeout and retry objects): a
move sends hundreds of node calls from each worker process, all to the one API server. So
when the client's pool is the plain case (no proxy, the certificate verified against the
kubeconfig's CA or the system's, no pinned fingerprint or server name, no socket options)
the node session sends them here: the same TLS settings, turned into one SSL context, on
connections kept for the next call, each checked before reuse the way urllib3 checks its
own (a connection the server closed meanwhile is replaced, not used). Anything else keeps
to urllib3 (`direct_pool` answers None).

Errors keep the types the callers handle: an answer other than 2xx is the client's
ApiException (from `Answer`), a broken exchange urllib3's ProtocolError or the OSError
itself (both transient), a certificate refused an SSLError (the session refuses it).
"""

from __future__ import annotations

import http.client
import ssl
import threading
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.util.ssl_ import create_urllib3_context
from urllib3.util.wait import wait_for_read

# Connections kept idle at most: the worker's node threads (MOVE_PARALLEL_NODES) at once.
KEPT = 64


@dataclass(frozen=True)
class Answer:
    """What the ApiException of the official client reads of a response (the headers as
    urllib3 gives them: case-insensitive, Retry-After read by the retry policy)."""

    status: int
    reason: str
    data: bytes
    headers: urllib3.HTTPHeaderDict

    def getheaders(self) -> urllib3.HTTPHeaderDict:
        return self.headers


class DirectPool:
    def __init__(self, host: str, port: int, context: ssl.SSLContext | None) -> None:
        self.host, self.port, self.context = host, port, context
        self.lock = threading.Lock()
        self.idle: list[http.client.HTTPConnection] = []

    def request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> Answer:
        connection = self._take(timeout)
        try:
            connection.request(method, path, body, headers)
            response = connection.getresponse()
            data = response.read()
            headers = urllib3.HTTPHeaderDict(response.getheaders())
            answer = Answer(response.status, response.reason, data, headers)
        except http.client.HTTPException as exc:
            connection.close()
            raise urllib3.exceptions.ProtocolError(f"{method} {path}: {exc!r}") from exc
        except BaseException:
            connection.close()
            raise
        if response.will_close:
            connection.close()
        else:
            self._give(connection)
        return answer

    def _take(self, timeout: float) -> http.client.HTTPConnection:
        while True:
            with self.lock:
                connection = self.idle.pop() if self.idle else None
            if connection is None:
                break
            # Readable while idle: the server closed it (or sent what nobody asked for).
            if connection.sock is not None and not wait_for_read(connection.sock, timeout=0.0):
                connection.sock.settimeout(timeout)
                connection.timeout = timeout
                return connection
            connection.close()
        if self.context is None:
            return http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPSConnection(
            self.host, self.port, timeout=timeout, context=self.context
        )

    def _give(self, connection: http.client.HTTPConnection) -> None:
        with self.lock:
            if len(self.idle) < KEPT:
                self.idle.append(connection)
                return
        connection.close()


def direct_pool(pool: Any) -> DirectPool | None:
    """Connections of our own with `pool`'s TLS settings, or None when `pool` is not the
    plain case this module reproduces."""
    if type(pool) is urllib3.HTTPConnectionPool:
        plain = pool.proxy is None and not _extra(pool.conn_kw)
        return DirectPool(pool.host, pool.port or 80, None) if plain else None
    if type(pool) is not urllib3.HTTPSConnectionPool or pool.proxy is not None:
        return None
    if (
        pool.cert_reqs not in (ssl.CERT_REQUIRED, "CERT_REQUIRED")
        or pool.assert_hostname is not None
        or pool.assert_fingerprint is not None
        or pool.ssl_version is not None
        or pool.ssl_minimum_version is not None
        or pool.ssl_maximum_version is not None
        or _extra(pool.conn_kw)
    ):
        return None
    context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    context.check_hostname = True
    if pool.ca_certs or pool.ca_cert_dir:
        context.load_verify_locations(cafile=pool.ca_certs, capath=pool.ca_cert_dir)
    else:
        context.load_default_certs()
    if pool.cert_file:
        context.load_cert_chain(pool.cert_file, pool.key_file, pool.key_password)
    return DirectPool(pool.host, pool.port or 443, context)


def _extra(conn_kw: dict[str, Any]) -> bool:
    """Connection settings beyond the defaults the official client passes."""
    return any(value is not None for key, value in conn_kw.items() if key not in ("blocksize",))
