"""Personal API tokens: created and revoked by their owner, stored hashed, sent as Bearer."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from pools.models import ApiToken


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiToken, str]:
    """A new token and its secret, which is shown once and never stored."""
    raw = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name.strip() or "token", key_hash=token_hash(raw), hint=raw[:10]
    )
    return token, raw


def token_revoke(*, user: AbstractBaseUser, token_id: int) -> bool:
    return bool(
        ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme != self.keyword:
            return None
        raw = raw.strip()
        if not raw:
            raise exceptions.AuthenticationFailed("The Authorization header has no token.")
        token = ApiToken.objects.select_related("user").filter(key_hash=token_hash(raw)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown API token.")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This API token was revoked.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("The token's user is inactive.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
            # At most one write a minute a token, not one a request.
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
