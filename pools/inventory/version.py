"""The inventory's version: a number in the shared cache that moves after every write of
node rows, so what was computed from the rows can be kept under it and is never served
once the rows changed (the API's node pages, pools/api/node_pages.py).

Every writer of `Node` rows calls `inventory_changed()` after its write: the upserts
(`nodes_upsert`), the moves' updates (`update_nodes`), the gone sweeps and the drift
recompute. The number moves when the writer's transaction commits, never before: a reader
that saw the old number may have read the old rows, and must not keep them under the new.

It starts at the current time in nanoseconds, not at zero: a counter lost with Redis and
made again never repeats a number something was kept under. Without a shared cache (no
CACHE_URL, or Redis unreachable) there is no version: another process's writes would not
move this process's number, so nothing may be kept under it.
"""

from __future__ import annotations

import time

from django.core.cache import cache, caches
from django.db import transaction

from pools.guarded_cache import GuardedRedisCache

KEY = "inventory:nodes:version"


def _shared() -> bool:
    return isinstance(caches["default"], GuardedRedisCache)


def inventory_version() -> int | None:
    """The current version, or None when there is no shared one."""
    if not _shared():
        return None
    version = cache.get(KEY)
    if version is None:  # first use, or lost with Redis; whoever adds first sets it
        cache.add(KEY, time.time_ns(), timeout=None)
        version = cache.get(KEY)
    return version


def _move() -> None:
    try:
        cache.incr(KEY)
    except ValueError:  # not made yet, or lost: a new start no earlier number can equal
        cache.add(KEY, time.time_ns(), timeout=None)


def inventory_changed() -> None:
    """Node rows were written: move the version once the write commits."""
    if _shared():
        transaction.on_commit(_move)
