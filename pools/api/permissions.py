"""API permissions: the capability each action needs, asked of pools.roles (as the pages do)."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from pools import guarded_cache
from pools.roles import Capability, has_capability, refusal_reason


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
    """The token's request rate, counted in the shared cache. Without the cache it fails
    open: a script is not refused because Redis is down, and the log says the limit is off."""

    scope = "token"

    def allow_request(self, request: Request, view: Any) -> bool:
        allowed = super().allow_request(request, view)
        if getattr(self, "key", None) and guarded_cache.CACHE in guarded_cache.degraded():
            log.warning(
                "API rate limit not enforced: the cache is unreachable (fails open)",
                extra={"degraded": guarded_cache.CACHE},
            )
            return True
        return allowed

    def get_rate(self) -> str | None:
        # Read at each request, not frozen at import, so the setting is the setting.
        from rest_framework.settings import api_settings

        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        token = getattr(request, "auth", None)
        if token is None or not hasattr(token, "key_hash"):
            return None  # session clients are people clicking, not scripts
        return self.cache_format % {"scope": self.scope, "ident": token.key_hash[:32]}
