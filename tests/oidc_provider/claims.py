"""What the test provider says about a user: the standard claims, and `groups` (the names
of the user's Django groups in the provider's own database) for the `groups` scope."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from oidc_provider.lib.claims import ScopeClaims


def userinfo(claims: dict[str, Any], user: Any) -> dict[str, Any]:
    claims["preferred_username"] = user.username
    claims["name"] = user.get_full_name() or user.username
    claims["email"] = user.email
    claims["email_verified"] = True
    return claims


class GroupsScopeClaims(ScopeClaims):  # type: ignore[misc]
    info_groups = (_("Groups"), _("The groups you belong to."))

    def scope_groups(self) -> dict[str, Any]:
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}
