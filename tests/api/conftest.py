from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from pools.tokens import token_create
from tests.moves_helpers import user_in

ROLES = ("viewers", "requesters", "approvers", "pool-admins")


@pytest.fixture
def token_for(db) -> Callable[[str], str]:  # type: ignore[no-untyped-def]
    def make(role: str, name: str | None = None) -> str:
        user = user_in(role, name or f"api-{role}")
        return token_create(user=user, name="test")[1]

    return make


def api(token: str | None = None) -> Client:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return Client(**headers)
