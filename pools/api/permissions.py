"""API permissions: the capability each action needs, asked of pools.common.roles, as the
pages ask it."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from django.core.cache import caches
from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from pools.common import guarded_cache
from pools.common.roles import Capability, has_capability, refusal_reason
from pools.core import rate_window


class HasCapability(permissions.BasePermission):
    """The view declares `capabilities = {action or method: Capability}`; VIEW by default."""

    message = "Your role does not allow this."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        needed: dict[str, Capability] = getattr(view, "capabilities", {})
        action = getattr(view, "action", None)
        capability = needed.get(action or "", needed.get(request.method or "", Capability.VIEW))
        if not has_capability(request.user, capability):
            self.message = refusal_reason(capability)
            return False
        return True


log = logging.getLogger("pools.api")


class ApiTokenThrottle(SimpleRateThrottle):
    """The token's request rate, a sliding-window counter (pools.core.rate_window) in the
    shared cache: one round trip a request, and exact under concurrent requests (DRF's own
    `allow_request` reads and rewrites a list of request times, two round trips, and lets
    two requests at once both take the last place). DRF still reads and parses the rate
    and names the token's key. Without the cache it fails open: a script is not refused
    because Redis is down, and the log says the limit is off."""

    scope = "token"
    wait_seconds: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        key = self.get_cache_key(request, view) if self.rate is not None else None
        if key is None:
            return True
        limit, period = self.num_requests, self.duration
        window = rate_window.window_at(time.time(), period)
        current, previous = f"{key}:{window.index}", f"{key}:{window.index - 1}"
        counts = count_in_window(current, previous, 2 * period)
        if counts is None:
            log.warning(
                "API rate limit not enforced: the cache is unreachable (fails open)",
                extra={"degraded": guarded_cache.CACHE},
            )
            return True
        counted, before = counts
        if rate_window.allowed(counted, before, window.elapsed, limit):
            return True
        # A refused request takes no place: a client that waits as told gets in.
        with contextlib.suppress(ValueError):  # the counter expired meanwhile: nothing to undo
            caches["default"].decr(current)
        self.wait_seconds = rate_window.retry_after(
            counted - 1, before, window.elapsed, limit, period
        )
        return False

    def wait(self) -> float | None:
        return self.wait_seconds

    def get_rate(self) -> str | None:
        # Read at each request, not frozen at import, so the setting is the setting.
        from rest_framework.settings import api_settings

        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        token = getattr(request, "auth", None)
        if token is None or not hasattr(token, "key_hash"):
            return None  # session clients are people clicking, not scripts
        return self.cache_format % {"scope": self.scope, "ident": token.key_hash[:32]}


def count_in_window(current: str, previous: str, timeout: int) -> tuple[int, int] | None:
    """One more request in the counter `current`, and the count in `previous`; None when
    the shared cache is unreachable. In one round trip on Redis; the per-process cache
    (no CACHE_URL) has no round trips to save."""
    cache = caches["default"]
    if isinstance(cache, guarded_cache.GuardedRedisCache):
        return cache.count_in_window(current, previous, timeout)
    cache.add(current, 0, timeout)
    try:
        counted = cache.incr(current)
    except ValueError:  # expired between the two
        cache.set(current, 1, timeout)
        counted = 1
    return counted, int(cache.get(previous, 0))
