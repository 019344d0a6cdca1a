"""Who may do what: the one place where pages and the API ask about permissions.

Roles are Django groups, created by the migration ``0001_roles``. A role grants a set of
capabilities; a user's capabilities are the union over their groups (a superuser has all).
"""

from __future__ import annotations

import enum
from functools import wraps

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied


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


def capabilities(user: AbstractBaseUser | AnonymousUser) -> frozenset[Capability]:
    if not user.is_authenticated or not user.is_active:
        return frozenset()
    if getattr(user, "is_superuser", False):
        return frozenset(Capability)
    cached = getattr(user, "_portal_capabilities", None)
    if cached is None:
        names = set(user.groups.values_list("name", flat=True))  # type: ignore[attr-defined]
        granted: set[Capability] = set()
        for role in Role:
            if role.value in names:
                granted |= ROLE_CAPABILITIES[role]
        cached = frozenset(granted)
        user._portal_capabilities = cached  # type: ignore[union-attr]  -- one query a request
    return cached


def has_capability(user: AbstractBaseUser | AnonymousUser, capability: Capability) -> bool:
    return capability in capabilities(user)


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


def emails_of_those_who(capability: Capability, *, but: int | None = None) -> list[str]:
    """The e-mail addresses of the active users holding `capability` (superusers included),
    except the user `but`: whom a notification to "the approvers" goes to."""
    from django.contrib.auth import get_user_model
    from django.db.models import Q

    roles = [r.value for r, caps in ROLE_CAPABILITIES.items() if capability in caps]
    users = (
        get_user_model()
        .objects.filter(Q(is_superuser=True) | Q(groups__name__in=roles), is_active=True)
        .exclude(email="")
    )
    if but is not None:
        users = users.exclude(pk=but)
    return sorted(set(users.values_list("email", flat=True)))
