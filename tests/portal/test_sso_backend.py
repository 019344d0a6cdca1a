"""The checks the portal adds to mozilla-django-oidc's backend."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import SuspiciousOperation
from django.test import Client

from portal.sso.backend import PortalOIDCBackend
from portal.sso.config import OIDC_BACKEND
from tests.moves_helpers import user_in
from tests.oidc_provider.fixtures import apply_sso
from tests.portal.test_sso_pages import PROVIDER


@pytest.fixture
def signing_key(settings: Any) -> rsa.RSAPrivateKey:
    """The provider's key given to the backend directly (OIDC_RP_IDP_SIGN_KEY)."""
    apply_sso(settings, PROVIDER)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    settings.OIDC_RP_IDP_SIGN_KEY = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return key


def id_token(key: rsa.RSAPrivateKey, **claims: Any) -> str:
    now = int(time.time())
    base = {"iss": "https://sso.example.com", "sub": "42", "nonce": "n", "iat": now}
    return jwt.encode({**base, "exp": now + 60, **claims}, key, algorithm="RS256")


def test_a_token_for_this_client_passes(signing_key: rsa.RSAPrivateKey) -> None:
    backend = PortalOIDCBackend()
    assert backend.verify_token(id_token(signing_key, aud="portal"), nonce="n")["sub"] == "42"
    assert backend.verify_token(id_token(signing_key, aud=["other", "portal"]), nonce="n")


@pytest.mark.parametrize("audience", ["other-client", ["a", "b"], None])
def test_a_token_for_another_client_is_refused(
    signing_key: rsa.RSAPrivateKey, audience: object
) -> None:
    claims = {} if audience is None else {"aud": audience}
    with pytest.raises(SuspiciousOperation, match="audience"):
        PortalOIDCBackend().verify_token(id_token(signing_key, **claims), nonce="n")


def test_an_expired_token_is_refused(signing_key: rsa.RSAPrivateKey) -> None:
    token = id_token(signing_key, aud="portal", exp=int(time.time()) - 120)
    with pytest.raises(jwt.ExpiredSignatureError):
        PortalOIDCBackend().verify_token(token, nonce="n")


@pytest.mark.django_db
def test_a_user_deactivated_mid_session_is_signed_out(client: Client, settings: Any) -> None:
    apply_sso(settings, PROVIDER)
    user = user_in("viewers", "erin")
    client.force_login(user, backend=OIDC_BACKEND)
    assert client.get("/").status_code == 200
    user.is_active = False
    user.save()
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
