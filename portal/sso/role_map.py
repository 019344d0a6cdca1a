"""Which portal roles a provider's groups grant. Pure: no Django, no HTTP.

``OIDC_ROLE_MAP`` reads ``group=role,group=role`` (a group may appear more than once to
grant several roles). The rule applied at every sign-on:

- the map *owns* the roles it names: those are set exactly from the groups in the claim,
  so a group removed at the provider takes its role away at the next sign-on, and a role
  the map names that someone granted by hand in the portal is removed as well;
- roles the map does not name are left as they are (an admin may grant them in the
  portal, and single sign-on never touches them);
- groups the map does not mention grant nothing.

Group names are compared exactly, case included (``/gpu-admins`` and ``gpu-admins`` are
different groups, as the provider means them).

A role may be scoped to a cluster, ``gpu-admins-eu=pool-admins@eu-west``: it is granted only
by the portal of that cluster (CLUSTER_NAME), so portals of several clusters can share one
map. A role without ``@`` holds everywhere. An item scoped to a cluster the portal does not
serve grants nothing here, and the role it names is not owned here because of it.

A portal serving several clusters grants a scoped item as the group ``<role>@<cluster>``,
which holds in that cluster only (pools.common.roles). Serving one, it grants the plain role,
as it always did.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from pools.core.names import dns_label_problem

RoleMap = Mapping[str, frozenset[str]]


class RoleMapError(ValueError):
    """A malformed ``group=role`` item, with what was expected."""


def parse_role_map(
    items: Iterable[str],
    *,
    roles: Collection[str],
    cluster: str = "default",
    others: Collection[str] = (),
) -> dict[str, frozenset[str]]:
    """``["gpu-admins=pool-admins", "ml-leads=approvers@eu-west"]`` -> group -> roles it
    grants by the portal of `cluster`, which also serves `others` (every item is checked,
    whichever cluster it names)."""
    granted: dict[str, set[str]] = {}
    for item in items:
        group, sep, scoped = item.partition("=")
        group, scoped = group.strip(), scoped.strip()
        if not sep or "=" in scoped:
            raise RoleMapError(f"expected group=role, got {item!r}")
        if not group:
            raise RoleMapError(f"no group before '=' in {item!r}")
        role, at, where = (part.strip() for part in scoped.partition("@"))
        if role not in roles:
            raise RoleMapError(
                f"{role!r} in {item!r} is not a portal role; choose from {', '.join(roles)}"
            )
        if at and (problem := dns_label_problem(where)):
            raise RoleMapError(f"the cluster {where!r} in {item!r}: {problem}")
        if at and where != cluster and where not in others:
            continue  # another cluster's portal grants it
        granted.setdefault(group, set()).add(f"{role}@{where}" if at and others else role)
    return {group: frozenset(names) for group, names in granted.items()}


def managed_roles(role_map: RoleMap) -> frozenset[str]:
    """The roles the map owns: every role on a right-hand side."""
    return frozenset().union(*role_map.values())


def groups_from_claim(value: object) -> frozenset[str]:
    """The groups claim as a set of names. Absent means no groups; a single string is one
    group (some providers send that for one membership); anything else is refused rather
    than guessed at."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return frozenset(value)
    raise RoleMapError(f"expected a list of group names, got {type(value).__name__}")


def roles_after_sign_on(
    *, held: Iterable[str], groups: Iterable[str], role_map: RoleMap, home: str = ""
) -> frozenset[str]:
    """The roles a user holds after signing on: the unmanaged ones kept, the managed ones
    exactly those the claim's groups grant. An item scoped to the portal's own cluster
    (`home`) also owns its plain role: the portal granted that while it served one cluster,
    and left in place it would hold in every cluster."""
    from_claim = frozenset().union(*(role_map.get(group, frozenset()) for group in groups))
    managed = managed_roles(role_map)
    if home:
        managed |= {name.removesuffix(f"@{home}") for name in managed if name.endswith(f"@{home}")}
    return (frozenset(held) - managed) | from_claim
