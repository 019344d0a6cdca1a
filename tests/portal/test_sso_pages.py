"""The sign-in and sign-out pages with single sign-on on or off (Django's test client)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from pools.tokens import token_create
from portal.sso.views import PASSWORDS_OFF
from tests.moves_helpers import user_in
from tests.oidc_provider.fixtures import apply_sso

PROVIDER = {
    "OIDC_RP_CLIENT_ID": "portal",
    "OIDC_RP_CLIENT_SECRET": "client-secret",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://sso.example.com/auth",
    "OIDC_OP_TOKEN_ENDPOINT": "https://sso.example.com/token",
    "OIDC_OP_USER_ENDPOINT": "https://sso.example.com/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://sso.example.com/certs",
    "OIDC_PROVIDER_NAME": "Corp SSO",
}


@pytest.mark.django_db
def test_without_sso_the_page_has_passwords_only_and_sso_paths_are_404(client: Client) -> None:
    page = client.get("/login/").content.decode()
    assert 'id="id_password"' in page
    assert "Sign in with" not in page
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404


@pytest.mark.django_db
def test_with_sso_the_page_offers_the_provider_beside_passwords(
    client: Client, settings: Any
) -> None:
    apply_sso(settings, PROVIDER)
    page = client.get("/login/?next=/moves/").content.decode()
    assert 'href="/oidc/authenticate/?next=/moves/"' in page
    assert "Sign in with Corp SSO" in page
    assert 'id="id_password"' in page
    User.objects.create_user("ada", password="correct horse battery")
    response = client.post("/login/", {"username": "ada", "password": "correct horse battery"})
    assert response.status_code == 302


@pytest.mark.django_db
def test_sign_in_goes_to_the_provider_with_state_nonce_and_pkce(
    client: Client, settings: Any
) -> None:
    apply_sso(settings, PROVIDER)
    response = client.get("/oidc/authenticate/?next=/moves/")
    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith("https://sso.example.com/auth?")
    for part in ("client_id=portal", "response_type=code", "state=", "nonce=", "code_challenge="):
        assert part in location
    assert "redirect_uri=http%3A%2F%2Ftestserver%2Foidc%2Fcallback%2F" in location
    assert client.session["oidc_login_next"] == "/moves/"


@pytest.mark.django_db
def test_passwords_off_hides_the_form_and_refuses_a_password(client: Client, settings: Any) -> None:
    apply_sso(settings, {**PROVIDER, "LOCAL_LOGIN_ENABLED": "false"})
    ada = User.objects.create_superuser("ada", password="correct horse battery")
    page = client.get("/login/").content.decode()
    assert "Sign in with Corp SSO" in page
    assert 'id="id_password"' not in page
    response = client.post("/login/", {"username": "ada", "password": "correct horse battery"})
    assert response.status_code == 403
    assert PASSWORDS_OFF in response.content.decode()
    assert client.get("/").status_code == 302  # still signed out
    # The admin's own sign-in form asks the same backends: no password gets in there either.
    client.post("/admin/login/", {"username": "ada", "password": "correct horse battery"})
    assert client.get("/admin/").status_code == 302
    # API tokens are not passwords: they keep working.
    token = token_create(user=ada, name="automation")[1]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get("/api/v1/pools/").status_code == 200


@pytest.mark.django_db
def test_logout_without_a_provider_session_is_the_plain_one(client: Client, settings: Any) -> None:
    apply_sso(settings, {**PROVIDER, "OIDC_OP_LOGOUT_ENDPOINT": "https://sso.example.com/logout"})
    client.force_login(user_in("viewers", "ada"))
    response = client.post("/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_logout_after_sso_moves_on_to_the_providers_end_session(
    client: Client, settings: Any
) -> None:
    apply_sso(settings, {**PROVIDER, "OIDC_OP_LOGOUT_ENDPOINT": "https://sso.example.com/logout"})
    client.force_login(user_in("viewers", "ada"))
    session = client.session
    session["oidc_id_token"] = "header.payload.signature"
    session.save()
    response = client.post("/logout/")
    assert response.status_code == 200
    page = response.content.decode()
    expected = (
        "https://sso.example.com/logout?id_token_hint=header.payload.signature&amp;"
        "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Flogin%2F"
    )
    assert f'<meta http-equiv="refresh" content="0; url={expected}">' in page
    assert client.get("/").status_code == 302  # the portal session is over already
