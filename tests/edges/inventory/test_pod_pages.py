"""A large pod listing is read in a process beside the watcher: the rows and the node
summaries are the same as when the watcher reads every page itself, pages come back in the
listing's order, and a reading process that dies loses no page."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from datetime import UTC, datetime

import pytest

from pools.core.pod_page import PageContext
from pools.core.pod_record import PodLabels
from pools.inventory.pod_pages import INLINE_PAGES, pod_pages
from pools.inventory.watch import WatchState, nodes_relist, pods_relist
from pools.kube.watching import list_pages
from pools.models import GpuPod
from tests.kubesim_process import Kubesim

pytestmark = pytest.mark.django_db
# The demo scenario's pods, three a page: a listing of more than INLINE_PAGES pages.
PAGE = 3
KEPT = ("uid", "name", "node_name", "pool_label", "phase", "units", "team", "resource_version")


def relisted(settings, processes: int) -> tuple[list[tuple[object, ...]], dict[str, object]]:  # type: ignore[no-untyped-def]
    settings.INVENTORY_READ_PROCESSES = processes
    GpuPod.everywhere.all().delete()
    state, leading = WatchState(), threading.Event()
    leading.set()
    nodes_relist(state)
    pods_relist(state, leading)
    rows = list(GpuPod.objects.order_by("uid").values_list(*KEPT))
    return rows, {node: sorted(pods.values(), key=repr) for node, pods in state.pods.items()}


def test_pages_read_in_a_process_make_the_same_rows(cluster: Kubesim, settings, caplog) -> None:  # type: ignore[no-untyped-def]
    settings.INVENTORY_PAGE_SIZE = PAGE
    pods = sum(len(page.items) for page in list_pages("pods"))
    assert pods > (INLINE_PAGES + 2) * PAGE
    with caplog.at_level(logging.INFO, logger="pools.inventory.pod_pages"):
        beside, beside_nodes = relisted(settings, 1)
    assert "its pages are read in 1 process(es)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pools.inventory.pod_pages"):
        here, here_nodes = relisted(settings, 0)
    assert "process" not in caplog.text
    assert len(here) == 36 and beside == here
    # Every bound pod on its node, GPU pods and the others (the node's CPU and memory).
    assert beside_nodes == here_nodes and sum(map(len, here_nodes.values())) > 36


def test_a_reading_process_that_dies_loses_no_page(cluster: Kubesim, settings, caplog) -> None:  # type: ignore[no-untyped-def]
    settings.INVENTORY_PAGE_SIZE = PAGE
    settings.INVENTORY_READ_PROCESSES = 1
    context = PageContext(PodLabels(), {}, datetime.now(UTC))
    expected = [str(raw["metadata"]["uid"]) for page in list_pages("pods") for raw in page.items]
    read: list[str] = []
    with caplog.at_level(logging.WARNING, logger="pools.inventory.pod_pages"):
        for index, (pods, _) in enumerate(pod_pages(context, {})):
            read += [pod.uid for pod in pods]
            if index == INLINE_PAGES:  # the first page read beside: the reader runs
                children = multiprocessing.active_children()
                assert children, "no reading process started"
                for child in children:
                    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    assert caplog.text.count("a process reading pod pages died or could not start") == 1
    assert read == expected  # every page, in the listing's order
