"""Personal API tokens: created and revoked by their owner, stored as a SHA-256 hash.

The secret is shown once, at creation, and never stored; a token is found again by the hash
of what the client sends. The pages (pools/token_views.py) create and revoke; the API's
authentication (pools/api/authentication.py) asks `token_authenticate`.

Each process remembers a token it found (with its user and the user's roles) for
API_TOKEN_CACHE_SECONDS: a script's every request would otherwise cost two queries before
its own. A revocation in this process forgets the token at once; one made in another
process (or a user deactivated, a role taken away) is refused here at the latest
API_TOKEN_CACHE_SECONDS later. An expiry is checked on every request.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from pools.models import ApiToken
from pools.roles import capabilities

# How often a token's last-used time is written: once a minute a token, not once a request.
LAST_USED_EVERY = timedelta(minutes=1)


class TokenRefused(Exception):
    """The token is unknown, revoked, expired, or its user inactive; the message says which."""


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class TokenInvalid(ValueError):
    """A token cannot be made as asked; the message says why."""


def token_create(
    *, user: AbstractBaseUser, name: str, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """A new token and its secret, which is shown once and never stored. With `expires_at`
    the token is refused from then on."""
    if expires_at is not None and expires_at <= timezone.now():
        raise TokenInvalid("A token's expiry must be in the future.")
    raw = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip() or "token",
        key_hash=token_hash(raw),
        hint=raw[:10],
        expires_at=expires_at,
    )
    return token, raw


def token_revoke(*, user: AbstractBaseUser, token_id: int) -> bool:
    """Revoke one of `user`'s own active tokens; False when there is no such token."""
    revoked = bool(
        ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )
    if revoked:
        _found.forget(token_id)
    return revoked


class FoundTokens:
    """The tokens this process found lately, by hash: (when found, the token)."""

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[float, ApiToken]] = {}
        self._lock = threading.Lock()

    def get(self, key_hash: str) -> ApiToken | None:
        found = self._tokens.get(key_hash)
        if found is None or time.monotonic() - found[0] >= settings.API_TOKEN_CACHE_SECONDS:
            return None
        return found[1]

    def put(self, token: ApiToken) -> None:
        if settings.API_TOKEN_CACHE_SECONDS <= 0:
            return
        now = time.monotonic()
        with self._lock:
            # Tokens not asked for lately go, so the memory stays that of the active ones.
            for key_hash, (found_at, _) in list(self._tokens.items()):
                if now - found_at >= settings.API_TOKEN_CACHE_SECONDS:
                    del self._tokens[key_hash]
            self._tokens[token.key_hash] = (now, token)

    def forget(self, token_id: int) -> None:
        with self._lock:
            for key_hash, (_, token) in list(self._tokens.items()):
                if token.pk == token_id:
                    del self._tokens[key_hash]


_found = FoundTokens()


def _token_found(key_hash: str) -> ApiToken | None:
    token = _found.get(key_hash)
    if token is not None:
        return token
    token = ApiToken.objects.select_related("user").filter(key_hash=key_hash).first()
    if token is not None and token.revoked_at is None and token.user.is_active:
        capabilities(token.user)  # loaded now, remembered with the user
        _found.put(token)
    return token


def token_authenticate(raw: str) -> ApiToken:
    """The active token whose secret is `raw` (with its user loaded), or TokenRefused."""
    token = _token_found(token_hash(raw))
    if token is None:
        raise TokenRefused("Unknown API token.")
    if token.revoked_at is not None:
        raise TokenRefused("This API token was revoked.")
    if not token.user.is_active:
        raise TokenRefused("The token's user is inactive.")
    now = timezone.now()
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRefused(f"This API token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC.")
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
