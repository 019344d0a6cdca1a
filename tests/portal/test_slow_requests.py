"""A request still running past SLOW_REQUEST_STACK_SECONDS has its stack logged once, with
the path and the request id, while it runs; a quick one, and the setting at 0, log nothing."""

from __future__ import annotations

import logging
import threading

from portal.slow_requests import SlowRequestWatch, slow_request_watch


def waiting_in_a_lock(
    watch: SlowRequestWatch, held: threading.Event, release: threading.Event
) -> None:
    with watch.running("/api/v1/nodes/", "req-1"):
        held.set()
        release.wait(30)


def test_a_slow_request_logs_where_it_waits_once(caplog) -> None:  # type: ignore[no-untyped-def]
    # Checked here alone. A threshold of 0: every running request is past it, however
    # coarse the clock (0.1 ms could read as no time at all between two looks).
    watch = SlowRequestWatch(threshold=0.0, background=False)
    held, release = threading.Event(), threading.Event()
    worker = threading.Thread(target=waiting_in_a_lock, args=(watch, held, release))
    worker.start()
    held.wait(30)
    with caplog.at_level(logging.WARNING, logger="portal.slow"):
        watch.check()
        watch.check()  # once a request
    release.set()
    worker.join(30)
    (record,) = caplog.records
    assert "request req-1 /api/v1/nodes/ still running after" in record.getMessage()
    assert "in waiting_in_a_lock" in record.getMessage()  # its stack, where it waits
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="portal.slow"):
        watch.check()  # ended: nothing left to log
    assert not caplog.records


def test_off_at_zero() -> None:
    assert slow_request_watch(0) is None
    assert slow_request_watch(2.0) is slow_request_watch(2.0)
