"""Single sign-on settings in a fresh process, the way a deployment starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "Zr8q-production-like-secret-4f1c9a7e-b2d6-4e0b-9c51-7a3f8d2e6b90-xK",
    "DJANGO_ALLOWED_HOSTS": "portal.example.com",
}
SSO = {
    "OIDC_RP_CLIENT_ID": "gpu-pool-portal",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://sso.example.com/auth",
    "OIDC_OP_TOKEN_ENDPOINT": "https://sso.example.com/token",
    "OIDC_OP_USER_ENDPOINT": "https://sso.example.com/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://sso.example.com/certs",
    "OIDC_ROLE_MAP": "gpu-admins=pool-admins,ml-leads=approvers",
    "LOCAL_LOGIN_ENABLED": "false",
}


def check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "OIDC_"))
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**clean, **env, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_complete_sso_configuration_starts(tmp_path: Path) -> None:
    secret = tmp_path / "client-secret"
    secret.write_text("mounted-client-secret\n")
    result = check({**BASE, **SSO, "OIDC_RP_CLIENT_SECRET_FILE": str(secret)})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"OIDC_ROLE_MAP": "gpu-admins=pool-admins,ml-leads=root"},
            "OIDC_ROLE_MAP: 'root' in 'ml-leads=root' is not a portal role; "
            "choose from viewers, requesters, approvers, pool-admins",
        ),
        ({"OIDC_ROLE_MAP": "gpu-admins"}, "OIDC_ROLE_MAP: expected group=role, got 'gpu-admins'"),
        (
            {"OIDC_OP_JWKS_ENDPOINT": ""},
            "OIDC_OP_JWKS_ENDPOINT: required when OIDC_RP_CLIENT_ID is set",
        ),
    ],
)
def test_a_bad_sso_setting_stops_start_up_naming_the_variable(
    change: dict[str, str], message: str
) -> None:
    result = check({**BASE, **SSO, "OIDC_RP_CLIENT_SECRET": "client-secret-value", **change})
    assert result.returncode != 0
    # The error is one line that names the variable, and nothing else (no traceback).
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].endswith(message)
    assert "client-secret-value" not in result.stderr
