"""The claim -> roles rule (pure) and the single sign-on settings read from an environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pools.common.roles import Role
from portal.env import EnvError
from portal.sso.config import MODEL_BACKEND, OIDC_BACKEND, PORTAL_ROLES, sso_settings
from portal.sso.role_map import (
    RoleMapError,
    groups_from_claim,
    managed_roles,
    parse_role_map,
    roles_after_sign_on,
)

ROLES = sorted(PORTAL_ROLES)
example = parse_role_map(["gpu-admins=pool-admins", "ml-leads=approvers"], roles=PORTAL_ROLES)


def test_settings_know_the_same_four_roles_as_pools_roles() -> None:
    assert set(PORTAL_ROLES) == {role.value for role in Role}


def test_parse_reads_groups_and_roles() -> None:
    assert example == {"gpu-admins": {"pool-admins"}, "ml-leads": {"approvers"}}
    several = parse_role_map(["ops=viewers", " ops = requesters "], roles=PORTAL_ROLES)
    assert several == {"ops": {"viewers", "requesters"}}


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("gpu-admins", "expected group=role, got 'gpu-admins'"),
        ("a=b=c", "expected group=role, got 'a=b=c'"),
        ("=approvers", "no group before '=' in '=approvers'"),
        ("gpu-admins=admins", "'admins' in 'gpu-admins=admins' is not a portal role"),
        ("gpu-admins=", "'' in 'gpu-admins=' is not a portal role"),
        ("gpu-admins=Approvers", "'Approvers' in 'gpu-admins=Approvers' is not a portal role"),
    ],
)
def test_parse_refuses_what_is_not_group_equals_role(item: str, problem: str) -> None:
    with pytest.raises(RoleMapError, match="^" + re.escape(problem)):
        parse_role_map([item], roles=PORTAL_ROLES)


def test_the_claim_sets_the_roles_the_map_owns_and_keeps_the_others() -> None:
    # requesters was granted in the portal and the map does not name it: kept.
    # approvers was granted in the portal but the map owns it: only ml-leads grants it.
    held = {"requesters", "approvers"}
    assert roles_after_sign_on(held=held, groups=["gpu-admins"], role_map=example) == {
        "requesters",
        "pool-admins",
    }
    assert roles_after_sign_on(held=held, groups=["ml-leads", "other"], role_map=example) == {
        "requesters",
        "approvers",
    }
    assert roles_after_sign_on(held=held, groups=[], role_map=example) == {"requesters"}
    assert roles_after_sign_on(held=held, groups=["gpu-admins"], role_map={}) == held


def test_groups_claim_shapes() -> None:
    assert groups_from_claim(None) == frozenset()
    assert groups_from_claim("ml-leads") == {"ml-leads"}
    assert groups_from_claim(["a", "b", "a"]) == {"a", "b"}
    for bad in ({"a": 1}, ["a", 2], 3):
        with pytest.raises(RoleMapError, match="expected a list of group names"):
            groups_from_claim(bad)


group_names = st.text(
    alphabet=st.characters(blacklist_characters=",=", blacklist_categories=("Cs", "Cc", "Z")),
    min_size=1,
    max_size=12,
)
role_maps = st.dictionaries(
    group_names, st.frozensets(st.sampled_from(ROLES), min_size=1), max_size=5
)
role_sets = st.frozensets(st.sampled_from(ROLES))
group_sets = st.frozensets(group_names, max_size=6)


@given(role_maps)
def test_a_map_written_out_reads_back_the_same(role_map: dict[str, frozenset[str]]) -> None:
    items = [f"{group}={role}" for group, roles in role_map.items() for role in sorted(roles)]
    assert parse_role_map(items, roles=PORTAL_ROLES) == role_map


@given(role_maps, role_sets, group_sets)
def test_managed_roles_come_from_the_claim_alone(
    role_map: dict[str, frozenset[str]], held: frozenset[str], groups: frozenset[str]
) -> None:
    after = roles_after_sign_on(held=held, groups=groups, role_map=role_map)
    managed = managed_roles(role_map)
    granted = {role for group in groups for role in role_map.get(group, ())}
    assert after & managed == granted
    assert after - managed == held - managed
    # Signing on again with the same claim changes nothing.
    assert roles_after_sign_on(held=after, groups=groups, role_map=role_map) == after


@given(role_maps, role_sets, group_sets, group_sets)
def test_losing_a_group_never_grants_a_role(
    role_map: dict[str, frozenset[str]],
    held: frozenset[str],
    groups: frozenset[str],
    extra: frozenset[str],
) -> None:
    fewer = roles_after_sign_on(held=held, groups=groups, role_map=role_map)
    more = roles_after_sign_on(held=held, groups=groups | extra, role_map=role_map)
    assert fewer <= more


PROVIDER = {
    "OIDC_RP_CLIENT_ID": "portal",
    "OIDC_RP_CLIENT_SECRET": "s3cret-value-never-shown",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://sso.example.com/auth",
    "OIDC_OP_TOKEN_ENDPOINT": "https://sso.example.com/token",
    "OIDC_OP_USER_ENDPOINT": "https://sso.example.com/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://sso.example.com/certs",
}


def test_sso_is_off_without_a_client_id() -> None:
    config = sso_settings({})
    assert config["OIDC_ENABLED"] is False
    assert config["AUTHENTICATION_BACKENDS"] == [MODEL_BACKEND]
    assert config["LOCAL_LOGIN_ENABLED"] is True
    assert config["OIDC_PROVIDER_NAME"] == "single sign-on"


def test_sso_settings_when_on() -> None:
    config = sso_settings({**PROVIDER, "OIDC_ROLE_MAP": "gpu-admins=pool-admins"})
    assert config["OIDC_ENABLED"] is True
    assert config["AUTHENTICATION_BACKENDS"] == [MODEL_BACKEND, OIDC_BACKEND]
    assert config["OIDC_RP_SIGN_ALGO"] == "RS256"
    assert config["OIDC_GROUPS_CLAIM"] == "groups"
    assert config["OIDC_ROLE_MAP"] == {"gpu-admins": {"pool-admins"}}
    assert config["OIDC_OP_LOGOUT_ENDPOINT"] is None
    off = sso_settings({**PROVIDER, "LOCAL_LOGIN_ENABLED": "false"})
    assert off["AUTHENTICATION_BACKENDS"] == [OIDC_BACKEND]


def test_client_secret_from_a_mounted_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("from-the-file\n")
    env = {k: v for k, v in PROVIDER.items() if k != "OIDC_RP_CLIENT_SECRET"}
    config = sso_settings({**env, "OIDC_RP_CLIENT_SECRET_FILE": str(secret)})
    assert config["OIDC_RP_CLIENT_SECRET"] == "from-the-file"


@pytest.mark.parametrize(
    "missing",
    [
        "OIDC_OP_AUTHORIZATION_ENDPOINT",
        "OIDC_OP_TOKEN_ENDPOINT",
        "OIDC_OP_USER_ENDPOINT",
        "OIDC_OP_JWKS_ENDPOINT",
        "OIDC_RP_CLIENT_SECRET",
    ],
)
def test_every_provider_setting_is_required_once_sso_is_on(missing: str) -> None:
    env = {k: v for k, v in PROVIDER.items() if k != missing}
    with pytest.raises(EnvError, match=f"^{missing}: required when OIDC_RP_CLIENT_ID is set"):
        sso_settings(env)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("OIDC_ROLE_MAP", "gpu-admins=root", "OIDC_ROLE_MAP: 'root' in 'gpu-admins=root'"),
        (
            "OIDC_ROLE_MAP",
            "a=viewers,,b=viewers",
            "OIDC_ROLE_MAP: expected a comma-separated list, got an empty item",
        ),
        ("OIDC_RP_SIGN_ALGO", "none", "OIDC_RP_SIGN_ALGO: expected one of RS256"),
        ("OIDC_RP_SCOPES", "email profile", "OIDC_RP_SCOPES: expected a list that includes"),
        ("OIDC_OP_TOKEN_ENDPOINT", "sso.example.com/token", "OIDC_OP_TOKEN_ENDPOINT: scheme"),
        ("OIDC_OP_LOGOUT_ENDPOINT", "ftp://sso/logout", "OIDC_OP_LOGOUT_ENDPOINT: scheme"),
        ("LOCAL_LOGIN_ENABLED", "sometimes", "LOCAL_LOGIN_ENABLED: expected a boolean"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(EnvError, match="^" + re.escape(message)) as caught:
        sso_settings({**PROVIDER, name: value})
    assert caught.value.name == name
    assert "s3cret-value-never-shown" not in str(caught.value)


def test_passwords_off_needs_sso_or_nobody_could_sign_in() -> None:
    with pytest.raises(EnvError, match=r"^LOCAL_LOGIN_ENABLED: false needs single sign-on"):
        sso_settings({"LOCAL_LOGIN_ENABLED": "false"})


def test_a_role_scoped_to_a_cluster_is_granted_by_that_clusters_portal_only() -> None:
    items = [
        "gpu-admins-eu=pool-admins@eu-west",
        "gpu-admins-us=pool-admins@us-east",
        "ml-leads=approvers",  # everywhere
    ]
    eu = parse_role_map(items, roles=PORTAL_ROLES, cluster="eu-west")
    assert eu == {"gpu-admins-eu": {"pool-admins"}, "ml-leads": {"approvers"}}
    us = parse_role_map(items, roles=PORTAL_ROLES, cluster="us-east")
    assert us == {"gpu-admins-us": {"pool-admins"}, "ml-leads": {"approvers"}}
    # Another cluster's item owns nothing here: a pool admin granted by hand stays one.
    only_elsewhere = parse_role_map(items[1:2], roles=PORTAL_ROLES, cluster="eu-west")
    assert roles_after_sign_on(
        held={"pool-admins"}, groups=["gpu-admins-us"], role_map=only_elsewhere
    ) == {"pool-admins"}


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("gpu-admins=pool-admins@", "the cluster '' in 'gpu-admins=pool-admins@'"),
        ("gpu-admins=pool-admins@EU_west", "the cluster 'EU_west' in"),
        ("gpu-admins=admins@eu-west", "'admins' in 'gpu-admins=admins@eu-west' is not a portal"),
    ],
)
def test_a_malformed_cluster_scope_is_refused_whichever_portal_reads_it(
    item: str, problem: str
) -> None:
    with pytest.raises(RoleMapError, match="^" + re.escape(problem)):
        parse_role_map([item], roles=PORTAL_ROLES, cluster="us-east")


def test_the_settings_grant_the_scoped_roles_of_the_portals_cluster() -> None:
    env = {**PROVIDER, "OIDC_ROLE_MAP": "eu=pool-admins@eu-west,us=pool-admins@us-east"}
    assert sso_settings(env, cluster="us-east")["OIDC_ROLE_MAP"] == {"us": {"pool-admins"}}
    with pytest.raises(EnvError, match="OIDC_ROLE_MAP: the cluster 'EU' in"):
        sso_settings({**PROVIDER, "OIDC_ROLE_MAP": "eu=viewers@EU"}, cluster="us-east")


def test_a_portal_serving_several_clusters_grants_scoped_roles_as_their_own_groups() -> None:
    items = [
        "gpu-admins-eu=pool-admins@eu-west",
        "gpu-admins-us=pool-admins@us-east",
        "gpu-admins-ap=pool-admins@ap-south",  # served by another portal
        "ml-leads=approvers",
    ]
    served = parse_role_map(items, roles=PORTAL_ROLES, cluster="eu-west", others=("us-east",))
    assert served == {
        "gpu-admins-eu": {"pool-admins@eu-west"},
        "gpu-admins-us": {"pool-admins@us-east"},
        "ml-leads": {"approvers"},
    }
    # The plain role the portal granted for its own cluster's item while it served one
    # cluster is owned too: left, it would hold in every cluster.
    assert roles_after_sign_on(
        held={"pool-admins", "viewers"}, groups=["gpu-admins-us"], role_map=served, home="eu-west"
    ) == {"pool-admins@us-east", "viewers"}
