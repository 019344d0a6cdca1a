"""The cyclic garbage collector paused while bulk data is decoded.

A listing of 15,000 nodes and 144,000 pods builds millions of objects (the decoded pages,
the pods' summaries, the rows) that survive long enough to reach the collector's oldest
generation, and each full collection then walks every one of them again: at that size the
collections cost a third of the initial sync's CPU. Decoding Prometheus' answers for the
node figures is the same on a smaller scale: 100,000 samples at 15,000 nodes, and a full
collection of a web process's heap set off in the middle of one answer took 80 ms of a
cold page's 200. Those objects hold no reference cycles (JSON, rows, tuples and frozen
summaries), so reference counting frees them; cycles made meanwhile wait for the collector
to resume when the last holder ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


class _Pause:
    """Listings (and queries) run in several threads at once: the collector resumes
    after the last."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            self.holders += 1
            gc.disable()
        try:
            yield
        finally:
            with self.lock:
                self.holders -= 1
                if not self.holders:
                    gc.enable()


collector_paused = _Pause()
