"""A web process remembers the tokens it found for at most API_TOKEN_CACHE_SECONDS: no query for
the token or its user's roles meanwhile, and what another process changed (a revocation, a
deactivated user, a role taken away) is refused at the latest that much later."""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.models import ApiToken
from pools.tokens import FoundTokens, token_create
from tests.api.conftest import api
from tests.moves_helpers import user_in

POOLS = "/api/v1/pools/"


def queries_of(client, path: str) -> int:  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return len(captured)


def dry_run(client):  # type: ignore[no-untyped-def]
    body = json.dumps({"nodes": ["x"], "destination": "mixed"})
    return client.post("/api/v1/moves/dry-run/", body, content_type="application/json")


@pytest.mark.django_db
def test_a_remembered_token_costs_no_query(settings) -> None:  # type: ignore[no-untyped-def]
    settings.API_TOKEN_CACHE_SECONDS = 60
    client = api(token_create(user=user_in("viewers", "vic"), name="ci")[1])
    first = queries_of(client, POOLS)  # the token, the user's roles, last-used, the pools
    again = queries_of(client, POOLS)
    assert first - again == 3
    settings.API_TOKEN_CACHE_SECONDS = 0
    other = api(token_create(user=user_in("viewers", "val"), name="ci")[1])
    queries_of(other, POOLS)
    assert queries_of(other, POOLS) == again + 2  # nothing remembered: token and roles


@pytest.mark.django_db
def test_a_revocation_by_another_process_is_refused_after_the_bound(settings) -> None:  # type: ignore[no-untyped-def]
    settings.API_TOKEN_CACHE_SECONDS = 1
    token, raw = token_create(user=user_in("viewers", "vic"), name="ci")
    client = api(raw)
    assert client.get(POOLS).status_code == 200
    # Another web process revokes it: this one's memory does not hear of it.
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    time.sleep(1.05)
    response = client.get(POOLS)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "This API token was revoked."


@pytest.mark.django_db
def test_a_deactivated_user_and_a_lost_role_are_refused_after_the_bound(settings) -> None:  # type: ignore[no-untyped-def]
    settings.API_TOKEN_CACHE_SECONDS = 1
    user = user_in("requesters", "rik")
    client = api(token_create(user=user, name="ci")[1])
    assert dry_run(client).status_code != 403
    user.groups.remove(Group.objects.get(name="requesters"))
    user.groups.add(Group.objects.get(name="viewers"))
    time.sleep(1.05)
    assert dry_run(client).status_code == 403
    assert client.get(POOLS).status_code == 200
    user.is_active = False
    user.save()
    time.sleep(1.05)
    response = client.get(POOLS)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "The token's user is inactive."


@pytest.mark.django_db
def test_a_revocation_through_this_process_is_refused_at_once(settings) -> None:  # type: ignore[no-untyped-def]
    from pools.tokens import token_revoke

    settings.API_TOKEN_CACHE_SECONDS = 60
    user = user_in("viewers", "vic")
    token, raw = token_create(user=user, name="ci")
    client = api(raw)
    assert client.get(POOLS).status_code == 200
    assert token_revoke(user=user, token_id=token.pk)
    assert client.get(POOLS).status_code == 401


@pytest.mark.django_db
def test_tokens_found_together_are_not_all_looked_up_again_together(settings) -> None:  # type: ignore[no-untyped-def]
    """Each is kept between half and all of API_TOKEN_CACHE_SECONDS: after three quarters
    of it some are still remembered and some not, and after all of it none."""
    settings.API_TOKEN_CACHE_SECONDS = 2
    user = user_in("viewers", "vic")
    found = FoundTokens()
    tokens = [token_create(user=user, name=f"script-{i}")[0] for i in range(100)]
    started = time.monotonic()
    for token in tokens:
        found.put(token)
    time.sleep(max(0.0, started + 1.5 - time.monotonic()))
    remembered = sum(found.get(token.key_hash) is not None for token in tokens)
    if time.monotonic() - started < 1.9:  # not so late (a loaded machine) that all have gone
        assert 0 < remembered < 100, remembered
    time.sleep(max(0.0, started + 2.05 - time.monotonic()))
    assert all(found.get(token.key_hash) is None for token in tokens)
