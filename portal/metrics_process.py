"""The metrics of a process group: its multiprocess directory, and its own /metrics when
it is not the web (a Celery worker, the inventory watcher).

Each pod has its own directory (an emptyDir under /tmp), so Prometheus scrapes each pod:
the web's /metrics through the Service, a worker's or the watcher's on METRICS_PORT. The
directory outlives a container restart, and a restarted container reuses the same process
ids, whose old files would carry on counting from stale values: the group's first process
empties it before any other starts (gunicorn's master, the Celery worker's main process,
the watcher). Nothing here needs Django's apps: gunicorn's master imports it.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from django.conf import settings
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, ThreadingWSGIServer
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)


def bearer_token_ok(authorization: str, token: str) -> bool:
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


class _DefaultRegistry(Collector):
    """This process's own figures, when it is the only one (no multiprocess directory)."""

    def collect(self):  # type: ignore[no-untyped-def]
        return REGISTRY.collect()


def process_registry() -> CollectorRegistry:
    """The figures every process of this group counted: summed from the multiprocess
    directory under gunicorn and Celery, this process's own otherwise."""
    registry = CollectorRegistry()
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        MultiProcessCollector(registry, path=directory)
    else:
        registry.register(_DefaultRegistry())
    return registry


def multiproc_dir_reset() -> Path | None:
    """Create PROMETHEUS_MULTIPROC_DIR if needed and remove every figure left in it."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return None
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink(missing_ok=True)
    return path


def metrics_app(token: str) -> Callable[..., Iterable[bytes]]:
    """A WSGI app answering GET /metrics with the group's figures, for the bearer token."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        if not bearer_token_ok(environ.get("HTTP_AUTHORIZATION", ""), token):
            start_response(
                "401 Unauthorized",
                [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="metrics"')],
            )
            return [b"a bearer token is required\n"]
        body = generate_latest(process_registry())
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)])
        return [body]

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """A scrape every few seconds is not worth a line."""


def metrics_process_start(*, what: str) -> ThreadingWSGIServer | None:
    """For a process that is its own group (the inventory watcher), first thing: empty its
    multiprocess directory, then serve its /metrics on METRICS_PORT."""
    multiproc_dir_reset()
    return metrics_server_start(what=what)


def metrics_server_start(*, what: str) -> ThreadingWSGIServer | None:
    """Serve this process group's /metrics on METRICS_PORT in a background thread (`what`
    names the process in the log). Not served without METRICS_PORT or METRICS_TOKEN."""
    port, token = settings.METRICS_PORT, settings.METRICS_TOKEN
    if not port:
        return None
    if not token:
        log.warning("%s: METRICS_PORT is set but METRICS_TOKEN is not: /metrics not served", what)
        return None
    server = make_server(
        "0.0.0.0",  # noqa: S104 -- Prometheus scrapes the pod's address
        port,
        metrics_app(token),
        server_class=ThreadingWSGIServer,
        handler_class=_QuietHandler,
    )
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    log.info("%s: serving /metrics on port %d", what, port)
    return server
