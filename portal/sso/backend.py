"""mozilla-django-oidc's backend, matching users by subject and applying the role map."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from portal.sso.accounts import oidc_user_get_or_create, oidc_user_sign_on
from portal.sso.role_map import RoleMapError, groups_from_claim

logger = logging.getLogger(__name__)


class PortalOIDCBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The library checks the signature, the algorithm and the nonce; the audience
        too, here: a token the provider issued to another client is not for the portal."""
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience or []
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("ID token audience is not this client")
        return payload

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return isinstance(claims.get("sub"), str) and claims["sub"] != ""

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> User | None:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        # OpenID Connect Core 5.3.2: the UserInfo response is about the ID token's subject
        # only if the two `sub` agree.
        if userinfo.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo sub differs from the ID token's")
        claims = {**payload, **userinfo}
        if not self.verify_claims(claims) or not isinstance(payload.get("iss"), str):
            raise SuspiciousOperation("ID token without sub or iss")
        claim_name = settings.OIDC_GROUPS_CLAIM
        try:
            groups = groups_from_claim(claims.get(claim_name))
        except RoleMapError as exc:
            raise SuspiciousOperation(f"{claim_name} claim: {exc}") from None
        if claim_name not in claims and settings.OIDC_ROLE_MAP:
            logger.warning(
                "single sign-on: no %r claim for subject %s; the roles OIDC_ROLE_MAP names "
                "are removed (does OIDC_RP_SCOPES request the scope that carries it?)",
                claim_name,
                claims["sub"],
            )
        user = oidc_user_get_or_create(issuer=payload["iss"], subject=claims["sub"], claims=claims)
        if user.is_active:  # a user an admin deactivated stays as it is, and is refused
            oidc_user_sign_on(
                user=user, claims=claims, groups=groups, role_map=settings.OIDC_ROLE_MAP
            )
        return user

    def get_user(self, user_id: int) -> User | None:
        # The library's get_user skips Django's is_active check: a user an admin
        # deactivated would keep an open session.
        return ModelBackend.get_user(self, user_id)  # type: ignore[return-value]
