"""Personal API tokens: created and revoked by their owner, stored as a SHA-256 hash.

The secret is shown once, at creation, and never stored; a token is found again by the hash
of what the client sends. The pages (pools/pages/tokens.py) create and revoke; the API's
authentication (pools/api/authentication.py) asks `token_authenticate`.

Each process remembers a token it found (with its user and the user's roles) for at most
API_TOKEN_CACHE_SECONDS: a script's every request would otherwise cost two queries before
its own. A revocation in this process forgets the token at once; one made in another
process (or a user deactivated, a role taken away) is refused here at the latest
API_TOKEN_CACHE_SECONDS later. An expiry is checked on every request.
"""

from __future__ import annotations

import hashlib
import random
import secrets
import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Case, DateTimeField, Value, When
from django.utils import timezone

from pools.common.roles import capabilities
from pools.models import ApiToken

# How often a process writes its tokens' last-used times: once a minute, not once a request.
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
    """The tokens this process found lately, by hash: (until when, the token). Each is kept
    for a random part, between half and all, of API_TOKEN_CACHE_SECONDS: scripts that
    started together would otherwise all be looked up again in the same instant, every
    time (two queries each, with every thread of the process waiting on the burst)."""

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[float, ApiToken]] = {}
        self._lock = threading.Lock()
        self._chance = random.Random()  # noqa: S311 -- spreads expiries, guards nothing

    def get(self, key_hash: str) -> ApiToken | None:
        found = self._tokens.get(key_hash)
        if found is None or time.monotonic() >= found[0]:
            return None
        return found[1]

    def put(self, token: ApiToken) -> None:
        seconds = settings.API_TOKEN_CACHE_SECONDS
        if seconds <= 0:
            return
        now = time.monotonic()
        with self._lock:
            # Tokens not asked for lately go, so the memory stays that of the active ones.
            for key_hash, (until, _) in list(self._tokens.items()):
                if now >= until:
                    del self._tokens[key_hash]
            self._tokens[token.key_hash] = (now + seconds * self._chance.uniform(0.5, 1.0), token)

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
    _last_uses.record(token, now)
    return token


class LastUses:
    """When this process last saw each token used, written for all of them in one statement
    at most once every `every`; a token's first use is written at once, so its "never"
    turns into a time straight away. Written a row at a time, fifty scripts whose tokens
    came due in the same second made fifty writes at once in each process, and SQLite
    lets one writer in at a time (the others sleep in its busy handler, mid-request).
    What is stored is at most `every` older than the token's last use."""

    def __init__(self, every: timedelta = LAST_USED_EVERY) -> None:
        self._every = every.total_seconds()
        self._seen: dict[int, datetime] = {}
        self._written_at = time.monotonic()
        self._lock = threading.Lock()

    def record(self, token: ApiToken, now: datetime) -> None:
        first = token.last_used_at is None
        token.last_used_at = now  # the remembered token: its first use is not written twice
        with self._lock:
            self._seen[token.pk] = now
            if not first and time.monotonic() - self._written_at < self._every:
                return
            seen, self._seen = self._seen, {}
            self._written_at = time.monotonic()
        write_last_uses(seen)


# Rows a statement: well within SQLite's and PostgreSQL's limits on a statement's parameters.
LAST_USES_A_STATEMENT = 500


def write_last_uses(seen: dict[int, datetime]) -> None:
    """Each token's last-used time, one UPDATE for up to LAST_USES_A_STATEMENT tokens."""
    items = list(seen.items())
    for start in range(0, len(items), LAST_USES_A_STATEMENT):
        chunk = dict(items[start : start + LAST_USES_A_STATEMENT])
        ApiToken.objects.filter(pk__in=chunk).update(
            last_used_at=Case(
                *(When(pk=pk, then=Value(at)) for pk, at in chunk.items()),
                output_field=DateTimeField(),
            )
        )


_last_uses = LastUses()
