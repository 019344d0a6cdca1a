"""Listing with the list's resourceVersion, and WATCH streams, as raw JSON.

The official client's `Watch` decodes every event into model objects and keeps the
resourceVersion only when it does; the inventory needs neither the models nor its one
silent retry after a 410, so it reads the stream's lines itself (the client's own line
splitter) and says what ended a stream: `WatchExpired` (410 Gone: list again) or
`KubeUnavailable` (the connection dropped or the server is away: resume later).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
from django.conf import settings
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from pools.kube.client import translate
from pools.kube.errors import KubeError, KubeUnavailable
from pools.kube.nodes import Raw, core_api
from pools.kube.retry import RetryPolicy

RESOURCES = ("nodes", "pods")
# The server ends a watch after this long (the client then resumes): bounded streams notice
# a lost lease or a wanted re-list even on a quiet cluster.
WATCH_SECONDS = 60
# Bookmarks arrive about every minute; a read that waits longer is a dead connection.
READ_TIMEOUT = WATCH_SECONDS + 30


class WatchExpired(KubeError):
    """410 Gone: the resourceVersion is older than the server's history; list again."""


class OpenStreams:
    """The watch streams open now, by resource, so another thread can end one at once (a
    re-list is wanted): on a quiet cluster a stream may carry no event for a minute, and
    the loop reading it would notice only then. `shutdown` of the response's socket is
    urllib3's way to interrupt a read blocked in another thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Any] = {}

    def opened(self, resource: str, response: Any) -> None:
        with self._lock:
            self._open[resource] = response

    def closed(self, resource: str, response: Any) -> None:
        with self._lock:
            if self._open.get(resource) is response:
                del self._open[resource]

    def interrupt(self, *resources: str) -> list[str]:
        """End the open streams of `resources`; the resources whose stream was open."""
        with self._lock:
            open_now = {r: self._open[r] for r in resources if r in self._open}
        for response in open_now.values():
            response.shutdown()
        return sorted(open_now)


@dataclass(frozen=True)
class Page:
    items: list[Raw]
    resource_version: str


def _call(resource: str) -> Any:
    core = core_api()
    return core.list_node if resource == "nodes" else core.list_pod_for_all_namespaces


class _ListMeta(msgspec.Struct):
    resource_version: str = msgspec.field(default="", name="resourceVersion")
    continue_: str = msgspec.field(default="", name="continue")


class _ListHead(msgspec.Struct):
    """What a list page says of the list: decoded alone, the items skipped unread."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


_head = msgspec.json.Decoder(_ListHead)


@dataclass(frozen=True)
class PageBody:
    body: bytes  # the page as the API server sent it: a list's JSON
    resource_version: str


def list_page_bodies(resource: str, page_size: int | None = None) -> Iterator[PageBody]:
    """Every page of `resource` (nodes or pods) as the API server sent it (limit and
    continue), each with the list's resourceVersion (the same on every page: one snapshot).
    Only the list's metadata is decoded here: the items are for whoever reads the page."""
    policy = RetryPolicy()
    token: str | None = None
    size = page_size or settings.INVENTORY_PAGE_SIZE
    while True:
        extra = {"_continue": token} if token else {}
        body = policy.call(
            lambda extra=extra: (
                _call(resource)(
                    limit=size,
                    _preload_content=False,
                    _request_timeout=settings.KUBE_TIMEOUT,
                    **extra,
                ).data
            ),
            doing=f"listing {resource}",
        )
        meta = _head.decode(body).metadata
        yield PageBody(body, meta.resource_version)
        token = meta.continue_
        if not token:
            return


def list_pages(resource: str, page_size: int | None = None) -> Iterator[Page]:
    """Every object of `resource`, page by page, decoded: msgspec decodes a page about four
    times as fast as the json module, into the same dicts and lists."""
    for page in list_page_bodies(resource, page_size):
        items = msgspec.json.decode(page.body).get("items") or []
        yield Page(items, page.resource_version)


def watch_events(
    resource: str, resource_version: str, streams: OpenStreams | None = None
) -> Iterator[dict[str, Any]]:
    """The events after `resource_version` (ADDED, MODIFIED, DELETED, BOOKMARK), until the
    server ends the stream (or `streams` interrupts it). Raises WatchExpired on 410,
    KubeUnavailable when cut off."""
    try:
        response = _call(resource)(
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(settings.KUBE_TIMEOUT, READ_TIMEOUT),
        )
    except ApiException as exc:
        if exc.status == 410:
            raise WatchExpired(f"watching {resource}: {exc.reason}") from exc
        raise translate(exc, doing=f"watching {resource}") from exc
    except Exception as exc:
        raise translate(exc, doing=f"watching {resource}") from exc
    if streams is not None:
        streams.opened(resource, response)
    try:
        yield from _events(resource, response)
    except KubeError:
        raise
    except Exception as exc:  # the connection dropped mid-stream
        raise KubeUnavailable(f"watching {resource}: the stream broke: {exc}") from exc
    finally:
        if streams is not None:
            streams.closed(resource, response)
        response.close()
        response.release_conn()


def _events(resource: str, response: Any) -> Iterator[dict[str, Any]]:
    for line in iter_resp_lines(response):
        if not line.strip():
            continue
        event = msgspec.json.decode(line)
        if event.get("type") == "ERROR":
            status = event.get("object") or {}
            if status.get("code") == 410:
                raise WatchExpired(f"watching {resource}: {status.get('message', 'Gone')}")
            raise KubeUnavailable(f"watching {resource}: {status.get('message', status)}")
        yield event
