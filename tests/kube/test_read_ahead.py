"""Reading pages ahead: the same pages in the same order, read in another thread, at most
one ahead; an error reading is raised to the caller; a caller that stops stops the reading."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from pools.kube.errors import KubeUnavailable
from pools.kube.read_ahead import read_ahead


class Pages:
    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.count, self.fail_at = count, fail_at
        self.read: list[int] = []
        self.threads: set[str] = set()

    def __iter__(self) -> Iterator[int]:
        for index in range(self.count):
            self.threads.add(threading.current_thread().name)
            if index == self.fail_at:
                raise KubeUnavailable("listing pods: the connection dropped")
            self.read.append(index)
            yield index


def wait_until(check: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.01)


def test_the_pages_come_in_order_read_by_another_thread() -> None:
    pages = Pages(50)
    assert list(read_ahead(iter(pages))) == list(range(50))
    assert pages.threads == {"read-ahead"}


def test_it_reads_at_most_one_page_ahead_of_the_caller() -> None:
    pages = Pages(10)
    reading = read_ahead(iter(pages))
    assert next(reading) == 0
    wait_until(lambda: len(pages.read) >= 3, seconds=0.5)
    # One handed over, one waiting in the queue, one read and waiting to be queued.
    assert len(pages.read) <= 3
    reading.close()


def test_an_error_reaches_the_caller_after_the_pages_before_it() -> None:
    pages = Pages(10, fail_at=4)
    seen = []
    with pytest.raises(KubeUnavailable, match="connection dropped"):
        for page in read_ahead(iter(pages)):
            seen.append(page)
    assert seen == [0, 1, 2, 3]


def test_a_caller_that_stops_stops_the_reading() -> None:
    pages = Pages(1000)
    for page in read_ahead(iter(pages)):
        if page == 2:
            break
    wait_until(lambda: False, seconds=0.5)
    assert len(pages.read) <= 5
