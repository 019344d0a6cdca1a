"""Where a slow request is: its stack, logged once while it still runs.

A request that takes seconds says only its total in the request log. With
SLOW_REQUEST_STACK_SECONDS set, a watchdog thread (one a process) looks at the requests
running every tenth of that time, and logs the stack of each one running longer, once: the
lines of the portal and of the libraries it waits in (a lock, a socket, the database), not
the values, so no secret is written. Off by default: it is for finding a stall, as the API
bench at 65,000 nodes did."""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger("portal.slow")


@dataclass
class _Running:
    started: float
    path: str
    request_id: str
    logged: bool = False


class SlowRequestWatch:
    def __init__(self, threshold: float, *, background: bool = True) -> None:
        """`background`: a thread checks (tests call check() themselves)."""
        self.threshold = threshold
        self.background = background
        self._running: dict[int, _Running] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def running(self, path: str, request_id: str) -> Iterator[None]:
        """Watch the request the current thread serves until it ends."""
        ident = threading.get_ident()
        with self._lock:
            self._running[ident] = _Running(time.monotonic(), path, request_id)
            if self.background and self._thread is None:
                self._thread = threading.Thread(target=self._watch, daemon=True, name="slow")
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._running.pop(ident, None)

    def _watch(self) -> None:
        while True:
            time.sleep(max(self.threshold / 10, 0.05))
            self.check()

    def check(self) -> None:
        """Log the stack of each request running longer than the threshold, once."""
        now = time.monotonic()
        frames = sys._current_frames()
        with self._lock:
            slow = [
                (ident, r)
                for ident, r in self._running.items()
                if not r.logged and now - r.started >= self.threshold
            ]
            for _, r in slow:
                r.logged = True
        for ident, r in slow:
            frame = frames.get(ident)
            if frame is None:
                continue
            stack = "".join(traceback.format_stack(frame, limit=12))
            log.warning(
                "request %s %s still running after %.1f s, at:\n%s",
                r.request_id,
                r.path,
                now - r.started,
                stack,
            )


_watch: SlowRequestWatch | None = None


def slow_request_watch(threshold: float) -> SlowRequestWatch | None:
    """The process's watch (None when the threshold is 0)."""
    global _watch
    if threshold <= 0:
        return None
    if _watch is None or _watch.threshold != threshold:
        _watch = SlowRequestWatch(threshold)
    return _watch
