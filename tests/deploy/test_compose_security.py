"""docker-compose.yml is secure unless told otherwise: HTTPS redirect and secure cookies are
on by default and switched off by a variable, never the other way round."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SECURE_BY_DEFAULT = ("DJANGO_SECURE_SSL_REDIRECT", "DJANGO_SECURE_COOKIES")


def interpolate(value: str, environment: dict[str, str]) -> str:
    """Compose's ${NAME:-default} and ${NAME:?message}, enough for these values."""

    def one(match: re.Match[str]) -> str:
        name, operator, default = match["name"], match["op"], match["rest"]
        if environment.get(name):
            return environment[name]
        assert operator == ":-", f"{name} is required"
        return default

    return re.sub(r"\$\{(?P<name>\w+)(?P<op>:[-?])(?P<rest>[^}]*)\}", one, str(value))


def portal_environment(service: str, environment: dict[str, str]) -> dict[str, str]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    declared = compose["services"][service]["environment"]
    secrets = {"DJANGO_SECRET_KEY": "x", "POSTGRES_PASSWORD": "y", **environment}
    return {name: interpolate(value, secrets) for name, value in declared.items()}


@pytest.mark.parametrize("service", ["web", "worker", "beat"])
def test_https_redirect_and_secure_cookies_are_the_default(service: str) -> None:
    env = portal_environment(service, {})
    assert env["DJANGO_DEBUG"] == "false"
    for name in SECURE_BY_DEFAULT:
        assert env[name] == "true", name
    assert "DJANGO_HSTS_SECONDS" not in env  # the settings' production default (one year)


def test_plain_http_is_an_explicit_opt_out() -> None:
    env = portal_environment("web", {name: "false" for name in SECURE_BY_DEFAULT})
    assert [env[name] for name in SECURE_BY_DEFAULT] == ["false", "false"]
