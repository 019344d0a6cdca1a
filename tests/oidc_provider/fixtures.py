"""pytest fixtures for the single sign-on tests, imported by tests/edges/portal/test_sso_flow.py
and tests/e2e/test_sso_browser.py under their function names (the fixtures are named
`provider` and `sso_on`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from portal.sso.config import sso_settings
from tests.oidc_provider.process import Provider, oidc_provider

ROLE_MAP = "gpu-admins=pool-admins,ml-leads=approvers"


def apply_sso(settings: Any, env: dict[str, str]) -> None:
    """The portal's settings as settings.py would make them from `env`."""
    for name, value in sso_settings(env).items():
        setattr(settings, name, value)


@pytest.fixture(scope="module", name="provider")
def provider_fixture(
    live_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Provider]:
    with oidc_provider(tmp_path_factory.mktemp("idp"), portal_url=live_server.url) as running:
        yield running


@pytest.fixture(name="sso_on")
def sso_on_fixture(settings: Any, provider: Provider) -> Callable[..., Provider]:
    """Turn single sign-on on against the test provider, with extra variables if given."""

    def turn_on(**env: str) -> Provider:
        apply_sso(settings, provider.portal_env(OIDC_ROLE_MAP=ROLE_MAP, **env))
        return provider

    turn_on()
    return turn_on
