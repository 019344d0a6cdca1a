"""Shared pieces of the move tests: users in roles, waiting for a request to finish."""

from __future__ import annotations

import time

from django.contrib.auth.models import Group, User

from pools.models import MoveRequest


def role_group(role: str) -> Group:
    """The role's group. The roles migration creates it, but a transactional test flushes
    every table when it ends, and under xdist any test may follow one."""
    return Group.objects.get_or_create(name=role)[0]


def user_in(role: str, name: str | None = None) -> User:
    user, _ = User.objects.get_or_create(username=name or f"u-{role}")
    user.groups.add(role_group(role))
    return user


def wait_for_state(request: MoveRequest, states: set[str], timeout: float = 60) -> MoveRequest:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        request.refresh_from_db()
        if request.state in states:
            return request
        time.sleep(0.1)
    raise AssertionError(
        f"move #{request.pk} is {request.state} after {timeout}s, wanted "
        f"{states}; items: {list(request.items.values_list('state', 'error'))}"
    )


FINAL = {MoveRequest.State.SUCCEEDED, MoveRequest.State.FAILED, MoveRequest.State.PARTIALLY_FAILED}
