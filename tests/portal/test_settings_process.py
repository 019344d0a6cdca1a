"""The settings module itself, loaded in a fresh process the way a deployment loads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "Zr8q-production-like-secret-4f1c9a7e-b2d6-4e0b-9c51-7a3f8d2e6b90-xK",
    "DJANGO_ALLOWED_HOSTS": "portal.example.com",
}


def run_django(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))}
    clean.update(env)
    clean["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_debug_maybe_stops_the_process_naming_the_variable() -> None:
    result = run_django(["check"], {**PRODUCTION_ENV, "DJANGO_DEBUG": "maybe"})
    assert result.returncode != 0
    assert "DJANGO_DEBUG: expected a boolean" in result.stderr


def test_malformed_database_url_stops_the_process_naming_the_variable() -> None:
    result = run_django(["check"], {**PRODUCTION_ENV, "DATABASE_URL": "postgress://h/db"})
    assert result.returncode != 0
    assert "DATABASE_URL: scheme must be one of" in result.stderr


def test_a_malformed_device_plugin_configuration_stops_the_process_naming_it() -> None:
    env = {**PRODUCTION_ENV, "DEVICE_PLUGIN_CONFIGS": "default=whole,ts=time-slicing:1"}
    result = run_django(["check"], env)
    assert result.returncode != 0
    assert "DEVICE_PLUGIN_CONFIGS: 'ts=time-slicing:1': expected whole, or" in result.stderr


def test_secret_key_is_required_unless_debug() -> None:
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "DJANGO_SECRET_KEY"}
    result = run_django(["check"], env)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY: required when DJANGO_DEBUG is off" in result.stderr
    assert run_django(["check"], {"DJANGO_DEBUG": "true"}).returncode == 0


def test_secret_key_file_variant(tmp_path: Path) -> None:
    key_file = tmp_path / "secret"
    key_file.write_text(PRODUCTION_ENV["DJANGO_SECRET_KEY"])
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "DJANGO_SECRET_KEY"}
    result = run_django(
        ["check", "--deploy", "--fail-level", "WARNING"],
        {**env, "DJANGO_SECRET_KEY_FILE": str(key_file)},
    )
    assert result.returncode == 0, result.stderr


def test_check_deploy_is_clean_with_production_settings() -> None:
    result = run_django(["check", "--deploy", "--fail-level", "WARNING"], PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "System check identified no issues" in result.stdout
