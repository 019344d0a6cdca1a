"""The cyclic collector is off while any listing runs, and back on after the last one."""

from __future__ import annotations

import gc
import threading

import pytest

from pools.core.gc_pause import collector_paused


def test_the_collector_resumes_after_the_last_of_two_listings() -> None:
    assert gc.isenabled()
    first_in, second_done, first_may_end = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            first_may_end.wait(5)
            seen.append(gc.isenabled())

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(5)
    with collector_paused():
        seen.append(gc.isenabled())
    second_done.set()
    seen.append(gc.isenabled())  # the first listing still runs
    first_may_end.set()
    thread.join(5)
    assert seen == [False, False, False]
    assert gc.isenabled()


def test_an_error_in_a_listing_resumes_the_collector() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the connection dropped")
    assert gc.isenabled()
