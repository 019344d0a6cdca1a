from __future__ import annotations

from django.test import Client

ROLES = ("viewers", "requesters", "approvers", "pool-admins")


def api(token: str | None = None) -> Client:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return Client(**headers)
