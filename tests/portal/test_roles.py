from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User

from pools.common.roles import Capability, Role, capabilities, has_capability
from tests.moves_helpers import role_group


@pytest.mark.django_db
def test_the_migration_creates_one_group_per_role() -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= {
        "viewers",
        "requesters",
        "approvers",
        "pool-admins",
    }
    assert {role.value for role in Role} == {"viewers", "requesters", "approvers", "pool-admins"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "expected"),
    [
        (Role.VIEWER, {Capability.VIEW}),
        (Role.REQUESTER, {Capability.VIEW, Capability.REQUEST_MOVE}),
        (Role.APPROVER, {Capability.VIEW, Capability.APPROVE_MOVE}),
        (Role.POOL_ADMIN, set(Capability)),
    ],
)
def test_capabilities_follow_the_groups(role: Role, expected: set[Capability]) -> None:
    user = User.objects.create_user(f"u-{role.value}")
    user.groups.add(role_group(role.value))
    assert capabilities(user) == expected


@pytest.mark.django_db
def test_no_group_no_capability_and_anonymous_has_none() -> None:
    assert capabilities(User.objects.create_user("nobody")) == frozenset()
    assert not has_capability(AnonymousUser(), Capability.VIEW)
    inactive = User.objects.create_user("gone", is_active=False)
    inactive.groups.add(role_group("pool-admins"))
    assert capabilities(inactive) == frozenset()


@pytest.mark.django_db
def test_superuser_has_every_capability() -> None:
    root = User.objects.create_superuser("root", password="x")
    assert capabilities(root) == frozenset(Capability)
