"""Who may do what: the one place where pages and the API ask about permissions.

Roles are Django groups, created by the migration ``0001_roles``. A role grants a set of
capabilities; a user's capabilities are the union over their groups (a superuser has all).
A group named ``<role>@<cluster>`` grants its role in that cluster only: a portal serving
several clusters checks the role against the cluster the request is about
(pools.common.cluster_access).
"""

from __future__ import annotations

import enum
from functools import wraps

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied

from pools.common.cluster_access import current_cluster, served_clusters
from pools.core.cluster_scope import cluster_scope


class Capability(enum.StrEnum):
    VIEW = "view"
    REQUEST_MOVE = "request_move"
    APPROVE_MOVE = "approve_move"
    EDIT_POOLS = "edit_pools"


class Role(enum.StrEnum):
    VIEWER = "viewers"
    REQUESTER = "requesters"
    APPROVER = "approvers"
    POOL_ADMIN = "pool-admins"


ROLE_CAPABILITIES: dict[Role, frozenset[Capability]] = {
    Role.VIEWER: frozenset({Capability.VIEW}),
    Role.REQUESTER: frozenset({Capability.VIEW, Capability.REQUEST_MOVE}),
    Role.APPROVER: frozenset({Capability.VIEW, Capability.APPROVE_MOVE}),
    Role.POOL_ADMIN: frozenset(Capability),
}


def role_held(group: str, cluster: str) -> Role | None:
    """The role a group grants in `cluster`: `<role>` everywhere, `<role>@<cluster>` there."""
    name, at, where = group.partition("@")
    if at and where != cluster:
        return None
    try:
        return Role(name)
    except ValueError:
        return None


def capabilities(user: AbstractBaseUser | AnonymousUser) -> frozenset[Capability]:
    """What `user` may do in the cluster the request is about."""
    if not user.is_authenticated or not user.is_active:
        return frozenset()
    if getattr(user, "is_superuser", False):
        return frozenset(Capability)
    names = getattr(user, "_portal_groups", None)
    if names is None:
        names = frozenset(user.groups.values_list("name", flat=True))  # type: ignore[attr-defined]
        user._portal_groups = names  # type: ignore[union-attr]  -- one query a request
    granted: set[Capability] = set()
    cluster = current_cluster()
    for group in names:
        if (role := role_held(group, cluster)) is not None:
            granted |= ROLE_CAPABILITIES[role]
    return frozenset(granted)


def has_capability(user: AbstractBaseUser | AnonymousUser, capability: Capability) -> bool:
    return capability in capabilities(user)


def clusters_where(user: AbstractBaseUser | AnonymousUser, capability: Capability) -> list[str]:
    """The clusters served where `user` has `capability` (the search box reads them all,
    and shows nothing of a cluster the user may not see), the current one first."""
    here = current_cluster()
    found = []
    for name in sorted(served_clusters(), key=lambda name: name != here):
        with cluster_scope(name):
            if has_capability(user, capability):
                found.append(name)
    return found


def refusal_reason(capability: Capability) -> str:
    """Why someone without `capability` is refused, naming the roles that grant it: what
    the 403 page, the API and the workflow all say."""
    granting = [role.value for role in Role if capability in ROLE_CAPABILITIES[role]]
    first, others = granting[0], granting[1:]
    return f"This needs the {first} role" + (f" (or {', '.join(others)})." if others else ".")


def require(capability: Capability):  # type: ignore[no-untyped-def]
    """View decorator: 403 unless the user has `capability` (login is already required)."""

    def decorator(view):  # type: ignore[no-untyped-def]
        @wraps(view)
        def wrapped(request, *args, **kwargs):  # type: ignore[no-untyped-def]
            if not has_capability(request.user, capability):
                raise PermissionDenied(refusal_reason(capability))
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def groups_granting(capability: Capability) -> list[str]:
    """The group names that grant `capability` in the current cluster."""
    roles = [r.value for r, caps in ROLE_CAPABILITIES.items() if capability in caps]
    return [*roles, *(f"{role}@{current_cluster()}" for role in roles)]


def emails_of_those_who(capability: Capability, *, but: int | None = None) -> list[str]:
    """The e-mail addresses of the active users holding `capability` (superusers included),
    except the user `but`: whom a notification to "the approvers" goes to."""
    from django.contrib.auth import get_user_model
    from django.db.models import Q

    roles = groups_granting(capability)
    users = (
        get_user_model()
        .objects.filter(Q(is_superuser=True) | Q(groups__name__in=roles), is_active=True)
        .exclude(email="")
    )
    if but is not None:
        users = users.exclude(pk=but)
    return sorted(set(users.values_list("email", flat=True)))
