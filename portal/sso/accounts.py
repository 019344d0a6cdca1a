"""The portal user behind a provider subject, and the roles its groups grant."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.utils import timezone

from pools.common.roles import Role
from portal.sso.models import OidcIdentity
from portal.sso.role_map import RoleMap, roles_after_sign_on

logger = logging.getLogger(__name__)
_NOT_IN_USERNAME = re.compile(r"[^\w.@+-]")
_USERNAME_MAX = 150


def oidc_user_find(*, issuer: str, subject: str) -> User | None:
    return (
        User.objects.filter(oidc_identity__issuer=issuer, oidc_identity__subject=subject)
        .select_related("oidc_identity")
        .first()
    )


def oidc_user_get_or_create(*, issuer: str, subject: str, claims: Mapping[str, Any]) -> User:
    """The user signed on as (issuer, subject); a new one, with no password, the first time."""
    user = oidc_user_find(issuer=issuer, subject=subject)
    if user is not None:
        return user
    try:
        with transaction.atomic():
            user = User.objects.create_user(
                _free_username(claims, issuer=issuer, subject=subject),
                email=str(claims.get("email") or ""),
            )
            OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            return user
    except IntegrityError:
        # Two first sign-ons of one subject at once: the other created the user.
        user = oidc_user_find(issuer=issuer, subject=subject)
        if user is None:
            raise
        return user


def oidc_user_sign_on(
    *, user: User, claims: Mapping[str, Any], groups: Iterable[str], role_map: RoleMap
) -> None:
    """What every sign-on refreshes: the e-mail and the roles the map owns."""
    with transaction.atomic():
        email = str(claims.get("email") or "")
        if email and email != user.email:
            user.email = email
            user.save(update_fields=["email"])
        OidcIdentity.objects.filter(user=user).update(last_sign_on_at=timezone.now())
        user_roles_apply(user=user, groups=groups, role_map=role_map)


def _is_role(name: str) -> bool:
    """A portal role, everywhere or in one cluster (`<role>@<cluster>`)."""
    return name.partition("@")[0] in set(Role)


def user_roles_apply(*, user: User, groups: Iterable[str], role_map: RoleMap) -> None:
    held = {name for name in user.groups.values_list("name", flat=True) if _is_role(name)}
    target = roles_after_sign_on(
        held=held, groups=groups, role_map=role_map, home=settings.CLUSTER_NAME
    )
    # A role scoped to a cluster is a group of its own, made at its first grant.
    wanted = held | target
    role_groups = {group.name: group for group in Group.objects.filter(name__in=wanted)}
    for name in sorted(target - role_groups.keys()):
        if "@" in name:
            role_groups[name] = Group.objects.get_or_create(name=name)[0]
    removed, added = held - target, (target - held) & role_groups.keys()
    if removed:
        user.groups.remove(*(role_groups[name] for name in removed))
    if added:
        user.groups.add(*(role_groups[name] for name in added))
    if removed or added:
        logger.info(
            "single sign-on: %s roles %s -> %s",
            user.get_username(),
            ",".join(sorted(held)) or "-",
            ",".join(sorted(target)) or "-",
        )


def _free_username(claims: Mapping[str, Any], *, issuer: str, subject: str) -> str:
    """preferred_username when no one has it; else that name with a suffix from the subject
    (an existing local account is never taken over by a provider user of the same name)."""
    wanted = str(claims.get("preferred_username") or "").strip()
    if not wanted:
        wanted = str(claims.get("email") or "").split("@", 1)[0] or "sso-user"
    base = _NOT_IN_USERNAME.sub("-", wanted)[: _USERNAME_MAX - 9]
    if not User.objects.filter(username__iexact=base).exists():
        return base
    digest = hashlib.sha256(f"{issuer} {subject}".encode()).hexdigest()[:8]
    return f"{base}-{digest}"
