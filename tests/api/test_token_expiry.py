"""API tokens may carry an expiry: set at creation, shown in the list, refused after it."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from pools.models import ApiToken
from pools.tokens import TokenInvalid, token_create
from tests.api.conftest import api
from tests.moves_helpers import user_in


@pytest.mark.django_db
def test_an_expired_token_is_refused_with_401(settings) -> None:  # type: ignore[no-untyped-def]
    # The process remembers the token longer than it lives: the expiry still holds.
    settings.API_TOKEN_CACHE_SECONDS = 60
    user = user_in("viewers", "vic")
    expires_at = timezone.now() + timedelta(seconds=3)
    raw = token_create(user=user, name="ci", expires_at=expires_at)[1]
    assert api(raw).get("/api/v1/pools/").status_code == 200
    time.sleep(max(0.0, (expires_at - timezone.now()).total_seconds()) + 0.05)
    response = api(raw).get("/api/v1/pools/")
    assert response.status_code == 401
    assert response.json()["error"]["message"].startswith("This API token expired at ")
    never = token_create(user=user, name="no expiry")[1]
    assert api(never).get("/api/v1/pools/").status_code == 200


@pytest.mark.django_db
def test_an_expiry_in_the_past_is_refused_at_creation() -> None:
    with pytest.raises(TokenInvalid):
        token_create(user=user_in("viewers"), name="ci", expires_at=timezone.now())
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_the_tokens_page_sets_and_shows_the_expiry() -> None:
    client = Client()
    client.force_login(user_in("viewers", "vic"))
    html = client.post(
        "/tokens/", {"name": "nightly", "expires_at": "2999-01-02T03:04"}, follow=True
    ).content.decode()
    token = ApiToken.objects.get()
    assert token.expires_at is not None
    assert token.expires_at.isoformat().startswith("2999-01-02T03:04")
    assert "2999-01-02 03:04" in html and 'id="token-secret"' in html
    html = client.post(
        "/tokens/", {"name": "old", "expires_at": "2001-01-01T00:00"}, follow=True
    ).content
    assert "Expires: A token&#x27;s expiry must be in the future." in html.decode()
    html = client.post(
        "/tokens/", {"name": "bad", "expires_at": "soon"}, follow=True
    ).content.decode()
    assert "Expires: Enter a valid date/time." in html
    assert ApiToken.objects.count() == 1
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(days=1))
    assert (
        '<span class="state state-cancelled">expired</span>'
        in client.get("/tokens/").content.decode()
    )
