"""Single sign-on in headless Chromium (Debian's, driven by Playwright) against a real
OpenID Connect provider: its own login form, the role the group grants, the role gone when
the group goes, sign-out at both ends, and a portal with passwords switched off."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from portal.sso.views import PASSWORDS_OFF
from tests.oidc_provider.fixtures import provider_fixture, sso_on_fixture  # noqa: F401
from tests.oidc_provider.process import Provider

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (make test installs it with apt when run as root)",
    ),
    pytest.mark.django_db(transaction=True),
]
# Django's ORM refuses to run inside Playwright's event loop thread without this.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"],
        )
        yield browser.new_page()
        browser.close()


def log_in_at_the_provider(page: Any, idp: Provider, username: str, password: str) -> None:
    page.click("text=Sign in with Example IdP")
    page.wait_for_selector("#idp-login")
    assert page.url.startswith(idp.url)
    assert page.title() == "Example IdP · Sign in"
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#idp-login button[type=submit]")


def roles(username: str) -> set[str]:
    return set(User.objects.get(username=username).groups.values_list("name", flat=True))


def test_sign_on_grants_the_mapped_role_and_a_removed_group_takes_it_away(
    live_server: Any, sso_on: Callable[..., Provider], page: Any
) -> None:
    idp = sso_on()
    idp.set_user("alice", password="alice-pw-1", email="a@example.com", groups=["gpu-admins"])
    page.goto(f"{live_server.url}/moves/")
    assert "/login/" in page.url
    log_in_at_the_provider(page, idp, "alice", "alice-pw-1")
    page.wait_for_url(f"{live_server.url}/moves/")  # back where she was going
    assert page.locator(".who").inner_text().startswith("alice")
    assert page.locator("nav.mainnav a", has_text="New pool").count() == 1
    assert page.goto(f"{live_server.url}/pools/new/").status == 200
    assert roles("alice") == {"pool-admins"}

    # At the provider, alice leaves gpu-admins for ml-leads. Signing out ends the portal
    # session and the provider's (its end_session_endpoint sends her back to sign in).
    idp.set_groups("alice", ["ml-leads"])
    page.goto(f"{live_server.url}/")
    page.click(".who button[type=submit]")
    page.wait_for_url(f"{live_server.url}/login/")
    log_in_at_the_provider(page, idp, "alice", "alice-pw-1")  # the provider asks again
    page.wait_for_url(f"{live_server.url}/")
    assert page.locator("nav.mainnav a", has_text="New pool").count() == 0
    assert page.goto(f"{live_server.url}/pools/new/").status == 403
    assert roles("alice") == {"approvers"}


def test_with_passwords_off_the_form_is_gone_and_a_posted_password_is_refused(
    live_server: Any, sso_on: Callable[..., Provider], page: Any
) -> None:
    idp = sso_on()
    User.objects.create_superuser("root", password="root-pw-1")
    idp.set_user("bea", password="bea-pw-1", email="b@example.com", groups=["ml-leads"])
    page.goto(f"{live_server.url}/login/")  # a form loaded before passwords were switched off
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")

    sso_on(LOCAL_LOGIN_ENABLED="false")
    page.goto(f"{live_server.url}/login/")
    assert page.locator("#id_password").count() == 0
    assert page.locator("a", has_text="Sign in with Example IdP").is_visible()
    refused = page.request.post(
        f"{live_server.url}/login/",
        form={"csrfmiddlewaretoken": token, "username": "root", "password": "root-pw-1"},
        headers={"Referer": f"{live_server.url}/login/"},
    )
    assert refused.status == 403
    assert PASSWORDS_OFF in refused.text()
    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url
    log_in_at_the_provider(page, idp, "bea", "bea-pw-1")
    page.wait_for_url(f"{live_server.url}/")
    assert roles("bea") == {"approvers"}
