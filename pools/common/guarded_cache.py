"""The shared cache (Redis) as something the portal can run without.

Everything the cache holds can be rebuilt (metric figures from Prometheus, rate-limit
counters) or is only an optimisation (refresh locks), so when Redis is down or slow the
portal keeps answering from the database and Prometheus instead of failing the request.
`GuardedRedisCache` is the one place that decides this: every operation that cannot reach
Redis logs a warning, answers as a cache that holds nothing would (`add` says yes, so a
refresher does its own work instead of waiting on a lock nobody holds), and marks the
current request as degraded. The web middleware opens a scope per request, says on the
response what was degraded (`X-Portal-Degraded`), and the pages show it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import RedisError

from pools.core.redact import redact_url

log = logging.getLogger("pools.cache")
T = TypeVar("T")

CACHE = "cache"
# What each degraded part means for whoever reads the page or the API's answer.
CONSEQUENCES = {
    CACHE: "the shared cache (Redis) is unreachable: figures are fetched for every page, "
    "the API's rate limit is not enforced",
}
# Short socket timeouts: a Redis that hangs must not hold a page longer than a down one.
SOCKET_TIMEOUT_SECONDS = 0.5


class _Scope:
    def __init__(self) -> None:
        self.degraded: dict[str, str] = {}  # part -> the first error seen


_scope: ContextVar[_Scope | None] = ContextVar("degraded_scope", default=None)


@contextlib.contextmanager
def request_scope() -> Iterator[None]:
    """What is degraded is said per request: a fresh record for each."""
    token = _scope.set(_Scope())
    try:
        yield
    finally:
        _scope.reset(token)


def mark_degraded(part: str, error: str) -> bool:
    """Record that `part` failed in this request; True the first time in the request (the
    moment to log it), or always outside a request scope."""
    scope = _scope.get()
    if scope is None:
        return True
    first = part not in scope.degraded
    scope.degraded.setdefault(part, error)
    return first


def degraded() -> dict[str, str]:
    """What failed in the current request: part -> what it means."""
    scope = _scope.get()
    return {part: CONSEQUENCES.get(part, part) for part in scope.degraded} if scope else {}


def caches_setting(url: str | None) -> dict[str, dict[str, Any]]:
    """Django's CACHES for a CACHE_URL: guarded Redis, or per-process memory without one."""
    if not url:
        return {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    return {
        "default": {
            "BACKEND": "pools.common.guarded_cache.GuardedRedisCache",
            "LOCATION": url,
            "OPTIONS": {
                "socket_connect_timeout": SOCKET_TIMEOUT_SECONDS,
                "socket_timeout": SOCKET_TIMEOUT_SECONDS,
            },
        }
    }


class ReusedClients(RedisCacheClient):
    """Django makes a new redis-py client for every cache operation, and the client's
    constructor builds its table of response callbacks (some 170 entries): more CPU than
    the command itself, three of them a request behind the API's rate limit alone. A client
    is safe to share between threads (each command borrows a connection from the pool), so
    one client per connection pool serves every operation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients.setdefault(id(pool), self._client(connection_pool=pool))
        return client


class GuardedRedisCache(RedisCache):
    """Django's Redis cache, answering as an empty cache when Redis cannot be reached."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = ReusedClients

    def _guard(self, operation: str, call: Callable[[], T], fallback: T) -> T:
        try:
            return call()
        except RedisError as exc:
            if mark_degraded(CACHE, str(exc)):
                log.warning(
                    "cache unreachable (%s at %s): %s; answering without it",
                    operation,
                    redact_url(str(self._servers[0])),
                    redact_url(str(exc)),
                    extra={"degraded": CACHE},
                )
            return fallback

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._guard(
            "get", lambda: super(GuardedRedisCache, self).get(key, default, version), default
        )

    def get_many(self, keys: Any, version: int | None = None) -> dict[str, Any]:
        return self._guard(
            "get_many", lambda: super(GuardedRedisCache, self).get_many(keys, version), {}
        )

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._guard(
            "has_key", lambda: super(GuardedRedisCache, self).has_key(key, version), False
        )

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> None:
        self._guard(
            "set", lambda: super(GuardedRedisCache, self).set(key, value, timeout, version), None
        )

    def add(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        # A lock nobody can hold: the caller goes ahead and does the work itself.
        return self._guard(
            "add", lambda: super(GuardedRedisCache, self).add(key, value, timeout, version), True
        )

    def set_many(
        self, data: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        return self._guard(
            "set_many", lambda: super(GuardedRedisCache, self).set_many(data, timeout, version), []
        )

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._guard(
            "touch", lambda: super(GuardedRedisCache, self).touch(key, timeout, version), False
        )

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._guard(
            "delete", lambda: super(GuardedRedisCache, self).delete(key, version), False
        )

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        self._guard(
            "delete_many", lambda: super(GuardedRedisCache, self).delete_many(keys, version), None
        )

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        return self._guard(
            "incr", lambda: super(GuardedRedisCache, self).incr(key, delta, version), delta
        )

    def clear(self) -> None:
        self._guard("clear", lambda: super(GuardedRedisCache, self).clear(), None)

    def count_in_window(self, current: str, previous: str, timeout: int) -> tuple[int, int] | None:
        """Add one to the counter `current` (kept `timeout` seconds) and read `previous`, in
        one round trip; None when Redis cannot be reached. Counters are stored as Django's
        Redis cache stores integers, so `incr` and `get` read them as usual."""

        def count() -> tuple[int, int]:
            pipe = self._cache.get_client(write=True).pipeline(transaction=False)
            key = self.make_and_validate_key(current)
            pipe.incr(key)
            pipe.expire(key, timeout)
            pipe.get(self.make_and_validate_key(previous))
            counted, _, before = pipe.execute()
            return int(counted), int(before or 0)

        return self._guard("count_in_window", count, None)
