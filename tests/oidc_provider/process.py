"""Start the test provider as its own process: its own SQLite, its own free port, an RSA
signing key made at start, the portal registered as a client."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.servers import free_port, http_ok, stop, wait_for

ROOT = Path(__file__).resolve().parent.parent.parent
CLIENT_ID = "gpu-pool-portal"
CLIENT_SECRET = "portal-client-secret-for-the-test-provider-only"


@dataclass
class Provider:
    url: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]

    @property
    def issuer(self) -> str:
        return f"{self.url}/openid"

    def manage(self, *args: str) -> None:
        _django(list(args), self.env)

    def set_user(self, username: str, *, password: str, email: str, groups: list[str]) -> None:
        groups_arg = f"--groups={','.join(groups)}"
        self.manage("idp_user", username, f"--password={password}", f"--email={email}", groups_arg)

    def set_groups(self, username: str, groups: list[str]) -> None:
        self.manage("idp_user", username, f"--groups={','.join(groups)}")

    def portal_env(self, **overrides: str) -> dict[str, str]:
        """The portal's environment for this provider, as an operator would write it."""
        env = {
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{self.issuer}/authorize",
            "OIDC_OP_TOKEN_ENDPOINT": f"{self.issuer}/token",
            "OIDC_OP_USER_ENDPOINT": f"{self.issuer}/userinfo",
            "OIDC_OP_JWKS_ENDPOINT": f"{self.issuer}/jwks",
            "OIDC_OP_LOGOUT_ENDPOINT": f"{self.issuer}/end-session",
            "OIDC_RP_SCOPES": "openid email profile groups",
            "OIDC_PROVIDER_NAME": "Example IdP",
        }
        env.update(overrides)
        return env


def _django(args: list[str], env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"test provider: {' '.join(args[:2])} failed:\n{result.stderr}")


@contextlib.contextmanager
def oidc_provider(workdir: Path, *, portal_url: str) -> Iterator[Provider]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "OIDC_"))},
        "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        "IDP_DATABASE": str(workdir / "idp.sqlite3"),
        "IDP_SITE_URL": url,
    }
    _django(["migrate", "--noinput"], env)
    _django(
        [
            "idp_client",
            "--client-id",
            CLIENT_ID,
            "--client-secret",
            CLIENT_SECRET,
            "--redirect-uri",
            f"{portal_url}/oidc/callback/",
            "--post-logout-redirect-uri",
            f"{portal_url}/login/",
        ],
        env,
    )
    log = (workdir / "idp.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        discovery = f"{url}/openid/.well-known/openid-configuration"
        wait_for(lambda: http_ok(discovery), timeout=30, what="the test OpenID Connect provider")
        yield Provider(url, env, process)
    finally:
        stop(process)
        log.close()
