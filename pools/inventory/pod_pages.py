"""The pages of a pod listing, read (pools.core.pod_page): the first few in this process, and
once the listing proves large, the rest in processes of their own (INVENTORY_READ_PROCESSES),
a page or two ahead of the caller writing the rows. Reading a pod costs more than writing
its row, and the watcher's one process can use one core only: at 500,000 pods, the second
core of a small machine takes about half of the initial sync.

Pages come back in the listing's order. A reading process that dies (killed, out of memory)
does not lose a page: that page and the rest are read here."""

from __future__ import annotations

import logging
import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import msgspec
from django.conf import settings

from pools.core.fit.resources import Resources
from pools.core.pod_page import ListedPod, PageContext, listed_pods, page_read, reader_start
from pools.kube.read_ahead import read_ahead
from pools.kube.watching import PageBody, list_page_bodies

log = logging.getLogger(__name__)

# A listing of this many pages or fewer is read here alone: a reading process costs about a
# third of a second to start, the reading of four pages of 500 pods less.
INLINE_PAGES = 4
BROKEN = "a process reading pod pages died or could not start: the rest of the listing is read here"


def _read_here(
    page: PageBody, context: PageContext, cache: dict[str, Resources]
) -> list[ListedPod]:
    items = msgspec.json.decode(page.body).get("items") or []
    return listed_pods(items, context, cache)


def _readers(processes: int, context: PageContext) -> ProcessPoolExecutor:
    # Spawned, not forked: the watcher holds threads and database connections a fork would
    # copy; the reader imports the pure core only.
    log.info("a large pod listing: its pages are read in %d process(es) beside this one", processes)
    return ProcessPoolExecutor(
        processes,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=reader_start,
        initargs=(context,),
    )


def pod_pages(
    context: PageContext, cache: dict[str, Resources]
) -> Iterator[tuple[list[ListedPod], str]]:
    """Each page of the pod listing, read: its pods and the list's resourceVersion."""
    processes = settings.INVENTORY_READ_PROCESSES
    readers: ProcessPoolExecutor | None = None
    broken = False
    pending: deque[tuple[Future[list[ListedPod]], PageBody]] = deque()

    def oldest() -> tuple[list[ListedPod], str]:
        nonlocal broken
        future, page = pending.popleft()
        try:
            return future.result(), page.resource_version
        except BrokenProcessPool:
            if not broken:
                log.warning(BROKEN)
            broken = True
            return _read_here(page, context, cache), page.resource_version

    try:
        for index, page in enumerate(read_ahead(list_page_bodies("pods"))):
            if not broken and processes and index >= INLINE_PAGES:
                try:
                    readers = readers or _readers(processes, context)
                    pending.append((readers.submit(page_read, page.body), page))
                except BrokenProcessPool:
                    log.warning(BROKEN)
                    broken = True
                else:
                    while len(pending) > processes + 1:  # readers busy, memory bounded
                        yield oldest()
                    continue
            while pending:
                yield oldest()
            yield _read_here(page, context, cache), page.resource_version
        while pending:
            yield oldest()
    finally:
        if readers is not None:
            readers.shutdown(wait=False, cancel_futures=True)
