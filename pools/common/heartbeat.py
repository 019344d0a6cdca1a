"""A process's liveness, cheaply: the process renews a file's time from its own main loop
(the Celery worker's event loop, beat's scheduler tick, the inventory watcher's write
loop), so a process that hangs stops renewing it; the probe,
`python -m pools.common.heartbeat FILE MAX_AGE`, fails once the file is older than MAX_AGE
seconds. No Django, database or broker: a probe costs a Python start and one stat.

Only the standard library here: the probe must not pay Django's start-up."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)


class Heartbeat:
    """Renews `path` at most every `every` seconds (callers may call on every loop)."""

    def __init__(self, path: str, every: float) -> None:
        self.path, self.every = path, every
        self._last: float | None = None
        self._lock = threading.Lock()

    def renew(self) -> None:
        if not self.path:
            return
        now = time.monotonic()
        with self._lock:
            if self._last is not None and now - self._last < self.every:
                return
            self._last = now
        try:
            Path(self.path).touch()
        except OSError as exc:
            # Not renewed: the probe will say so; the process keeps working meanwhile.
            log.warning("could not renew the heartbeat %s: %s", self.path, exc.strerror)


def heartbeat_problem(path: str, max_age: float, *, now: float | None = None) -> str | None:
    """Why the process behind `path` counts as hung, or None when it renewed it lately."""
    try:
        renewed = os.stat(path).st_mtime
    except FileNotFoundError:
        return f"no heartbeat at {path}: the process has not renewed it once"
    except OSError as exc:
        return f"cannot read the heartbeat {path}: {exc.strerror}"
    age = (time.time() if now is None else now) - renewed
    if age > max_age:
        return f"heartbeat {path} last renewed {age:.0f}s ago, over {max_age:g}s: hung"
    return None


def main(argv: list[str]) -> int:
    usage = "usage: python -m pools.common.heartbeat FILE MAX_AGE_SECONDS"
    if len(argv) != 2:
        print(usage, file=sys.stderr)
        return 2
    try:
        max_age = float(argv[1])
    except ValueError:
        print(f"{usage} (MAX_AGE_SECONDS: a number, got {argv[1]!r})", file=sys.stderr)
        return 2
    problem = heartbeat_problem(argv[0], max_age)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
