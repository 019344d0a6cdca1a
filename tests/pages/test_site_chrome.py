"""What every page shares: the icon, the way back from the API docs, the error pages, and the
token page's post-redirect-get."""

from __future__ import annotations

import pytest
from django.test import Client

from pools.models import ApiToken
from tests.moves_helpers import user_in


def client_for(role: str, name: str | None = None) -> Client:
    client = Client()
    client.force_login(user_in(role, name))
    return client


@pytest.mark.django_db
def test_favicon_is_served_without_login_and_linked_from_every_page() -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 302
    icon = Client().get(response["Location"])
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)
    login = Client().get("/login/").content.decode()
    assert 'rel="icon" href="/static/portal/favicon.svg"' in login
    assert 'rel="icon"' in client_for("viewers").get("/").content.decode()


@pytest.mark.django_db
def test_api_docs_link_back_to_the_portal() -> None:
    html = client_for("viewers").get("/api/docs/").content.decode()
    assert '<nav class="portal-back"' in html and 'href="/"' in html
    assert '<link rel="icon" href="/favicon.ico">' in html


@pytest.mark.django_db
def test_creating_a_token_redirects_so_a_reload_makes_no_second_one() -> None:
    client = client_for("viewers", "vera")
    created = client.post("/tokens/", {"name": "ci"})
    assert created.status_code == 302 and created["Location"] == "/tokens/"
    page = client.get("/tokens/").content.decode()
    assert 'id="token-secret">gpp_' in page  # shown once, after the redirect
    assert ApiToken.objects.count() == 1
    again = client.get("/tokens/").content.decode()  # a reload is a GET: nothing new
    assert "token-secret" not in again and ApiToken.objects.count() == 1
    empty = client.post("/tokens/", {"name": " "}, follow=True)
    assert "Give the token a name" in empty.content.decode() and ApiToken.objects.count() == 1


@pytest.mark.django_db
def test_403_has_the_layout_and_says_which_role_it_needs() -> None:
    response = client_for("viewers").get("/moves/new/")
    html = response.content.decode()
    assert response.status_code == 403
    assert 'class="mainnav"' in html and 'data-status="403"' in html
    assert "This needs the requesters role (or pool-admins)." in html


@pytest.mark.django_db
def test_the_api_gives_the_same_reason_for_a_refusal() -> None:
    from pools.tokens import token_create
    from tests.api.conftest import api

    raw = token_create(user=user_in("viewers", "val"), name="t")[1]
    response = api(raw).post("/api/v1/moves/", {}, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "This needs the requesters role (or pool-admins)."


@pytest.mark.django_db
def test_404_has_the_layout() -> None:
    response = client_for("viewers").get("/pools/no-such-pool/")
    html = response.content.decode()
    assert response.status_code == 404
    assert 'class="mainnav"' in html and 'data-status="404"' in html
    assert "<code>/pools/no-such-pool/</code>" in html


def test_500_renders_the_site_layout_without_a_request_context() -> None:
    from django.test import RequestFactory
    from django.views.defaults import server_error

    response = server_error(RequestFactory().get("/"))
    html = response.content.decode()
    assert response.status_code == 500
    assert 'class="topbar"' in html and 'data-status="500"' in html
    assert 'href="/static/portal/portal.css"' in html
