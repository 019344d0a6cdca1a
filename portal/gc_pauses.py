"""Pauses of Python's cyclic garbage collector, logged when long.

A full collection walks every container object the process holds, with the interpreter lock
held: every thread of a web worker stops mid-request until it ends. A worker holding a large
cluster's figures can pause for seconds, and nothing else says why requests stalled. Each
collection is timed (a callback before and after: a few microseconds); one longer than
GC_PAUSE_LOG_SECONDS is logged with its generation and what it walked and freed.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

log = logging.getLogger("portal.gc")

_started: list[float] = []


def _timed(phase: str, info: dict[str, Any], threshold: float) -> None:
    if phase == "start":
        _started[:] = [time.perf_counter()]
        return
    if not _started:
        return
    paused = time.perf_counter() - _started.pop()
    if paused >= threshold:
        log.warning(
            "garbage collection of generation %s paused every thread for %.0f ms "
            "(%d objects collected, %d uncollectable; %d objects frozen, counts now %s)",
            info.get("generation"),
            paused * 1000,
            info.get("collected", 0),
            info.get("uncollectable", 0),
            gc.get_freeze_count(),
            gc.get_count(),
        )


def gc_pauses_log(threshold_seconds: float) -> None:
    """Log every collection that pauses the process longer than `threshold_seconds` (0: off).
    Once a process."""
    if threshold_seconds <= 0 or any(getattr(c, "_portal", False) for c in gc.callbacks):
        return

    def callback(phase: str, info: dict[str, Any]) -> None:
        _timed(phase, info, threshold_seconds)

    callback._portal = True  # type: ignore[attr-defined]
    gc.callbacks.append(callback)
