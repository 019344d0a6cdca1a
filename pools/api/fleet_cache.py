"""The node list's pages, kept rendered: scripts poll `GET /api/v1/nodes/` many times a
second, and between two inventory writes and two metric refreshes every answer to the same
URL is the same bytes.

A page is kept under its absolute URL (scheme, host, path and query: the `next` and
`previous` links are absolute), the media type the client accepts, the inventory's version
(pools/inventory/version.py) and the node figures' version (pools/metrics/node_figures.py);
each request reads both versions before the rows, so a page made from older rows or
figures is never found again once either moved.
Each web process keeps its own few pages (a page is kept at most as long as the figures'
version lives, METRICS_CACHE_SECONDS); authentication, the role check and the rate limit
still run for every request, before the page is looked up.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from django.http import HttpResponse
from rest_framework.request import Request

from pools.inventory.version import inventory_version

RenderedPageKey = tuple[str, str, int, float]


class RenderedPage(NamedTuple):
    body: bytes
    content_type: str


# Enough for every client's first pages and a few filters; the oldest goes first.
KEPT_PAGES = 64
# How long a request waits for another thread rendering the same page before it renders
# its own: a page takes milliseconds, so only a stuck renderer makes anyone wait this long.
MAKE_WAIT_SECONDS = 5.0


class RenderedPages:
    def __init__(self, size: int = KEPT_PAGES) -> None:
        self._pages: OrderedDict[RenderedPageKey, RenderedPage] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()
        self._making: dict[RenderedPageKey, threading.Event] = {}  # pages being rendered now

    def get(self, key: RenderedPageKey) -> RenderedPage | None:
        with self._lock:
            page = self._pages.get(key)
            if page is not None:
                self._pages.move_to_end(key)
            return page

    def put(self, key: RenderedPageKey, page: RenderedPage) -> None:
        with self._lock:
            self._pages[key] = page
            self._pages.move_to_end(key)
            while len(self._pages) > self._size:
                self._pages.popitem(last=False)

    def kept_or_made(self, key: RenderedPageKey, make: Callable[[], HttpResponse]) -> HttpResponse:
        """The page kept under `key`, or the answer `make` renders (kept when it is a 200).
        When a version moves, every thread of the process asks for the new page at once:
        one renders it and the others wait for it, instead of each rendering the same bytes
        under the interpreter lock (a stall of every request in flight, every refresh)."""
        with self._lock:
            page = self._pages.get(key)
            if page is not None:
                self._pages.move_to_end(key)
                return HttpResponse(page.body, content_type=page.content_type)
            making = self._making.get(key)
            if making is None:
                self._making[key] = threading.Event()
        if making is not None:
            making.wait(timeout=MAKE_WAIT_SECONDS)
            page = self.get(key)
            if page is not None:
                return HttpResponse(page.body, content_type=page.content_type)
            return self._made(key, make)  # the maker's answer was not a page to keep
        try:
            return self._made(key, make)
        finally:
            with self._lock:
                self._making.pop(key).set()

    def _made(self, key: RenderedPageKey, make: Callable[[], HttpResponse]) -> HttpResponse:
        response = make()
        if response.status_code == 200:
            self.put(key, RenderedPage(response.content, response["Content-Type"]))
        return response


rendered_pages = RenderedPages()


def page_key(request: Request, figures_version: float) -> RenderedPageKey:
    """What the page is kept under. The inventory's version is a database row that every
    writer of node rows raises in its own transaction, so it is shared by every process
    with or without Redis."""
    # The accepted media type too: `application/json; indent=4` is rendered indented.
    return (
        request.build_absolute_uri(),
        request.accepted_media_type,
        inventory_version(),
        figures_version,
    )
