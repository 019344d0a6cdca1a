"""The single sign-on settings, read from the environment; settings.py applies them.

OpenID Connect is on when ``OIDC_RP_CLIENT_ID`` is set; then the client secret and every
provider endpoint are required. A malformed or missing value stops start-up with an
``EnvError`` naming the variable.
"""

from __future__ import annotations

from typing import Any

from portal.env import EnvError, env_bool, env_list, env_secret, env_str, env_url
from portal.sso.role_map import RoleMapError, parse_role_map

# The four roles of pools/common/roles.py. Settings cannot import that module (it loads the auth
# models, which need the app registry settings are building); tests/portal/test_sso_role_map.py
# holds the two equal.
PORTAL_ROLES = ("viewers", "requesters", "approvers", "pool-admins")
# mozilla-django-oidc verifies RS*/ES* with the provider's JWKS, HS256 with the client
# secret; "none" (an unsigned token) is never accepted.
SIGN_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "HS256")
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
OIDC_BACKEND = "portal.sso.backend.PortalOIDCBackend"
_URL_SCHEMES = {"http", "https"}
# Every call to the provider (token, userinfo, JWKS) gives up after this many seconds.
OIDC_TIMEOUT_SECONDS = 10


def sso_settings(
    environ_: dict[str, str] | None = None,
    *,
    cluster: str = "default",
    others: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Django settings for sign-in: the backends, and mozilla-django-oidc's OIDC_* names;
    roles scoped to a cluster (`role@cluster`) are granted only by `cluster`'s portal."""
    local_login = env_bool("LOCAL_LOGIN_ENABLED", True, environ_)
    try:
        items = env_list("OIDC_ROLE_MAP", [], environ_)
        role_map = parse_role_map(items, roles=PORTAL_ROLES, cluster=cluster, others=others)
    except RoleMapError as exc:
        raise EnvError("OIDC_ROLE_MAP", str(exc)) from None
    common: dict[str, Any] = {
        "LOCAL_LOGIN_ENABLED": local_login,
        "OIDC_ROLE_MAP": role_map,
        "OIDC_GROUPS_CLAIM": env_str("OIDC_GROUPS_CLAIM", "groups", environ_),
        "OIDC_PROVIDER_NAME": env_str("OIDC_PROVIDER_NAME", "single sign-on", environ_),
    }
    client_id = env_str("OIDC_RP_CLIENT_ID", "", environ_)
    if not client_id:
        if not local_login:
            raise EnvError(
                "LOCAL_LOGIN_ENABLED",
                "false needs single sign-on (set OIDC_RP_CLIENT_ID and the OIDC_OP_* "
                "endpoints), or nobody could sign in",
            )
        return {**common, "OIDC_ENABLED": False, "AUTHENTICATION_BACKENDS": [MODEL_BACKEND]}
    backends = [MODEL_BACKEND, OIDC_BACKEND] if local_login else [OIDC_BACKEND]
    return {
        **common,
        **_provider_settings(environ_),
        "OIDC_ENABLED": True,
        "OIDC_RP_CLIENT_ID": client_id,
        "AUTHENTICATION_BACKENDS": backends,
    }


def _provider_settings(environ_: dict[str, str] | None) -> dict[str, Any]:
    required = {
        "OIDC_OP_AUTHORIZATION_ENDPOINT": env_url(
            "OIDC_OP_AUTHORIZATION_ENDPOINT", None, environ_, schemes=_URL_SCHEMES
        ),
        "OIDC_OP_TOKEN_ENDPOINT": env_url(
            "OIDC_OP_TOKEN_ENDPOINT", None, environ_, schemes=_URL_SCHEMES
        ),
        "OIDC_OP_USER_ENDPOINT": env_url(
            "OIDC_OP_USER_ENDPOINT", None, environ_, schemes=_URL_SCHEMES
        ),
        "OIDC_OP_JWKS_ENDPOINT": env_url(
            "OIDC_OP_JWKS_ENDPOINT", None, environ_, schemes=_URL_SCHEMES
        ),
        "OIDC_RP_CLIENT_SECRET": env_secret("OIDC_RP_CLIENT_SECRET", environ_),
    }
    for name, value in required.items():
        if value is None:
            also = " (or OIDC_RP_CLIENT_SECRET_FILE)" if name == "OIDC_RP_CLIENT_SECRET" else ""
            raise EnvError(name, f"required when OIDC_RP_CLIENT_ID is set{also}")
    algorithm = env_str("OIDC_RP_SIGN_ALGO", "RS256", environ_)
    if algorithm not in SIGN_ALGORITHMS:
        raise EnvError(
            "OIDC_RP_SIGN_ALGO", f"expected one of {', '.join(SIGN_ALGORITHMS)}, got {algorithm!r}"
        )
    scopes = env_str("OIDC_RP_SCOPES", "openid email profile", environ_)
    if "openid" not in scopes.split():
        raise EnvError("OIDC_RP_SCOPES", f"expected a list that includes openid, got {scopes!r}")
    return {
        **required,
        "OIDC_RP_SIGN_ALGO": algorithm,
        "OIDC_RP_SCOPES": scopes,
        "OIDC_OP_LOGOUT_ENDPOINT": env_url(
            "OIDC_OP_LOGOUT_ENDPOINT", None, environ_, schemes=_URL_SCHEMES
        ),
        # The ID token is the id_token_hint for the provider's end_session_endpoint.
        "OIDC_STORE_ID_TOKEN": True,
        # PKCE as well as the client secret: a stolen authorization code is useless alone.
        "OIDC_USE_PKCE": True,
        "OIDC_TIMEOUT": OIDC_TIMEOUT_SECONDS,
    }
