"""The API's Bearer authentication over the personal tokens of pools.tokens."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from pools.models import ApiToken
from pools.tokens import TokenRefused, token_authenticate


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme != self.keyword:
            return None  # another scheme: let the next authentication class try
        raw = raw.strip()
        if not raw:
            raise exceptions.AuthenticationFailed("The Authorization header has no token.")
        try:
            token = token_authenticate(raw)
        except TokenRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from exc
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
