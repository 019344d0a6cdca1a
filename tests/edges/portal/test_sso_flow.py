"""Single sign-on against a real OpenID Connect provider (django-oidc-provider, its own
process), through its real login form, over HTTP with `requests` (the browser walk is in
test_sso_browser.py)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
import requests
from django.contrib.auth.models import User

from portal.sso.models import OidcIdentity
from portal.sso.views import SSO_FAILED
from tests.moves_helpers import role_group
from tests.oidc_provider import tamper
from tests.oidc_provider.fixtures import provider_fixture, sso_on_fixture  # noqa: F401
from tests.oidc_provider.process import Provider
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def sign_on(portal: str, username: str, password: str) -> tuple[requests.Session, str]:
    """Start at the portal, log in at the provider's form, return where the browser lands
    (the portal page after the callback) and the page's text."""
    session = requests.Session()
    form = session.get(f"{portal}/oidc/authenticate/?next=/", timeout=30)
    assert 'id="idp-login"' in form.text, form.text[:500]
    field = {
        name: html.unescape(value)
        for name, value in re.findall(
            r'name="(csrfmiddlewaretoken|next)" value="([^"]*)"', form.text
        )
    }
    landed = session.post(
        form.url, data={**field, "username": username, "password": password}, timeout=30
    )
    return session, landed.url.removeprefix(portal) + "\n" + landed.text


def signed_in(session: requests.Session, portal: str) -> bool:
    return session.get(f"{portal}/", allow_redirects=False, timeout=30).status_code == 200


def roles(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_roles_follow_the_groups_claim_at_every_sign_on(
    live_server: Any, sso_on: Callable[..., Provider]
) -> None:
    idp = sso_on()
    idp.set_user("alice", password="alice-pw-1", email="alice@example.com", groups=["gpu-admins"])
    session, page = sign_on(live_server.url, "alice", "alice-pw-1")
    assert page.startswith("/\n")
    assert signed_in(session, live_server.url)
    alice = User.objects.get(oidc_identity__issuer=idp.issuer)
    assert alice.username == "alice"
    assert alice.email == "alice@example.com"
    assert not alice.has_usable_password()
    assert roles(alice) == {"pool-admins"}

    # An admin grants two roles in the portal: one the map names, one it does not.
    alice.groups.add(role_group("approvers"), role_group("requesters"))
    idp.set_groups("alice", ["ml-leads", "unrelated"])
    sign_on(live_server.url, "alice", "alice-pw-1")
    assert roles(alice) == {"approvers", "requesters"}  # pool-admins gone with gpu-admins

    idp.set_groups("alice", [])
    sign_on(live_server.url, "alice", "alice-pw-1")
    assert roles(alice) == {"requesters"}  # approvers is the map's: gone with ml-leads
    assert OidcIdentity.objects.count() == 1


def test_users_are_matched_by_subject_not_by_name_or_email(
    live_server: Any, sso_on: Callable[..., Provider]
) -> None:
    idp = sso_on()
    local = User.objects.create_superuser("bob", email="bob@example.com", password="local-pw-1")
    idp.set_user("bob", password="bob-pw-1", email="bob@example.com", groups=[])
    sign_on(live_server.url, "bob", "bob-pw-1")
    provider_bob = User.objects.get(oidc_identity__issuer=idp.issuer)
    assert provider_bob.pk != local.pk  # the local admin account is not taken over
    assert re.fullmatch(r"bob-[0-9a-f]{8}", provider_bob.username)
    assert not provider_bob.is_superuser

    # The provider gives bob a new address; the subject is what identifies him.
    idp.set_user("bob", password="bob-pw-1", email="robert@example.com", groups=[])
    sign_on(live_server.url, "bob", "bob-pw-1")
    provider_bob.refresh_from_db()
    assert provider_bob.email == "robert@example.com"
    assert User.objects.count() == 2


@pytest.mark.parametrize(
    "forgery", [tamper.claims_altered, tamper.signed_by_another_key], ids=lambda f: f.__name__
)
def test_an_id_token_the_provider_did_not_sign_is_refused(
    live_server: Any,
    sso_on: Callable[..., Provider],
    forgery: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    idp = sso_on()
    idp.set_user("mallory", password="mallory-pw-1", email="m@example.com", groups=["gpu-admins"])
    with tamper.token_proxy(idp.portal_env()["OIDC_OP_TOKEN_ENDPOINT"], forgery) as proxy:
        sso_on(OIDC_OP_TOKEN_ENDPOINT=proxy)
        session, page = sign_on(live_server.url, "mallory", "mallory-pw-1")
    assert page.startswith("/login/\n")
    assert SSO_FAILED in html.unescape(page)
    assert not signed_in(session, live_server.url)
    assert not User.objects.exists()
    assert "single sign-on refused: SuspiciousOperation: JWS token verification failed" in (
        caplog.text
    )


def test_the_same_proxy_passing_the_token_untouched_signs_in(
    live_server: Any, sso_on: Callable[..., Provider]
) -> None:
    """The control for the test above: the proxy itself breaks nothing."""
    idp = sso_on()
    idp.set_user("trent", password="trent-pw-1", email="t@example.com", groups=["ml-leads"])
    with tamper.token_proxy(idp.portal_env()["OIDC_OP_TOKEN_ENDPOINT"], tamper.untouched) as proxy:
        sso_on(OIDC_OP_TOKEN_ENDPOINT=proxy)
        session, page = sign_on(live_server.url, "trent", "trent-pw-1")
    assert page.startswith("/\n")
    assert signed_in(session, live_server.url)
    assert roles(User.objects.get(username="trent")) == {"approvers"}


def test_a_user_deactivated_in_the_portal_is_refused(
    live_server: Any, sso_on: Callable[..., Provider]
) -> None:
    idp = sso_on()
    idp.set_user("carol", password="carol-pw-1", email="c@example.com", groups=["ml-leads"])
    sign_on(live_server.url, "carol", "carol-pw-1")
    User.objects.filter(username="carol").update(is_active=False)
    session, page = sign_on(live_server.url, "carol", "carol-pw-1")
    assert page.startswith("/login/\n")
    assert SSO_FAILED in html.unescape(page)
    assert not signed_in(session, live_server.url)


def test_an_unreachable_token_endpoint_is_a_message_not_an_error_page(
    live_server: Any, sso_on: Callable[..., Provider]
) -> None:
    idp = sso_on(OIDC_OP_TOKEN_ENDPOINT=f"http://127.0.0.1:{free_port()}/token")
    idp.set_user("dave", password="dave-pw-1", email="d@example.com", groups=[])
    session, page = sign_on(live_server.url, "dave", "dave-pw-1")
    assert page.startswith("/login/\n")
    assert SSO_FAILED in html.unescape(page)
    assert not signed_in(session, live_server.url)
