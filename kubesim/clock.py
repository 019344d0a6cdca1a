"""The cluster's clock, which tests can run fast, and one timer thread for everything due later.

Everything in kubesim that happens "after a while" — a terminating pod going away when its
grace period ends, the node lifecycle controller's NoExecute taint, a disruption budget's
recheck — is a timer on this clock, served by one thread: no thread or sleep per object, so
114,000 terminating pods cost a heap entry each.

The clock runs at real speed by default; `scale` makes it run faster, and `Timers.run_until`
steps it forward through every timer due on the way, each fired at its own time while the
clock stands still, so a test never sleeps and a replay gives the same times however long
it takes.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

Callback = Callable[[], None]


class Clock:
    def __init__(self, scale: float = 1.0) -> None:
        self._lock = threading.Lock()
        self._wall_start = time.time()
        self._mono_start = time.monotonic()
        self._offset = 0.0
        self._scale = scale
        self._formatted: tuple[int, str] = (-1, "")

    def now(self) -> float:
        """Simulated seconds since the epoch."""
        with self._lock:
            return self._now()

    def _now(self) -> float:
        elapsed = time.monotonic() - self._mono_start
        return self._wall_start + elapsed * self._scale + self._offset

    @property
    def scale(self) -> float:
        return self._scale

    def set_scale(self, scale: float) -> None:
        with self._lock:
            # Rebase so the simulated time does not jump when the speed changes.
            current = self._now()
            self._wall_start, self._mono_start, self._offset = current, time.monotonic(), 0.0
            self._scale = scale

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    def set_now(self, when: float) -> None:
        """Jump to `when` (forward or back); the clock keeps running from there."""
        with self._lock:
            self._offset += when - self._now()

    def real_seconds_until(self, when: float) -> float:
        """How long, in real time, until the simulated time reaches `when`."""
        with self._lock:
            remaining = when - self._now()
            if self._scale <= 0:
                return float("inf") if remaining > 0 else 0.0
            return max(0.0, remaining / self._scale)

    def rfc3339(self, when: float | None = None) -> str:
        second = int(self.now() if when is None else when)
        # Seeding stamps 114,000 pods within a few seconds: format each second once.
        cached = self._formatted
        if cached[0] != second:
            cached = self._formatted = (
                second,
                datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
        return cached[1]

    def rfc3339_micro(self, when: float | None = None) -> str:
        moment = self.now() if when is None else when
        return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 timestamp as the API server writes them."""
    text = text.replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


class Timers:
    """Callbacks due at simulated times, fired in order by one thread (or by `run_due`).

    `guard` is held while callbacks run (the store's lock), so a callback sees and changes
    the cluster atomically; `after` runs once after each batch (the controllers' settle).
    """

    def __init__(self, clock: Clock, guard: threading.RLock) -> None:
        self.clock = clock
        self._guard = guard
        self._heap: list[tuple[float, int, Callback]] = []
        self._seq = itertools.count()
        self._changed = threading.Condition(threading.Lock())
        self.after: Callback | None = None

    def at(self, when: float, callback: Callback) -> None:
        with self._changed:
            heapq.heappush(self._heap, (when, next(self._seq), callback))
            self._changed.notify()

    def __len__(self) -> int:
        return len(self._heap)

    def wake(self) -> None:
        """The clock changed (advanced, rescaled): recompute the wait."""
        with self._changed:
            self._changed.notify()

    def run_due(self) -> int:
        """Fire every callback due now; how many fired."""
        fired = 0
        with self._guard:
            while True:
                with self._changed:
                    if not self._heap or self._heap[0][0] > self.clock.now():
                        break
                    _, _, callback = heapq.heappop(self._heap)
                callback()
                fired += 1
            if fired and self.after is not None:
                self.after()
        return fired

    def run_until(self, when: float) -> int:
        """Step the clock to `when`, firing each timer due on the way at its own time (so what
        it writes carries that time), timers it adds included; how many fired. The clock
        stands still meanwhile (a replay gives the same times however long it takes), then
        runs on at its speed."""
        with self._guard:
            scale = self.clock.scale
            self.clock.set_scale(0.0)
            try:
                return self._step_to(when)
            finally:
                self.clock.set_scale(scale)

    def _step_to(self, when: float) -> int:
        fired = 0
        while True:
            with self._changed:
                due = self._heap[0][0] if self._heap else None
            if due is None or due > when:
                break
            if due > self.clock.now():
                self.clock.set_now(due)
            fired += self.run_due()
        if self.clock.now() < when:
            self.clock.set_now(when)
        return fired + self.run_due()

    def run_forever(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with self._changed:
                wait = (
                    self.clock.real_seconds_until(self._heap[0][0]) if self._heap else float("inf")
                )
                if wait > 0:
                    # Wake at least once a second: a stop request must not wait for a timer.
                    self._changed.wait(timeout=min(wait, 1.0))
            self.run_due()
