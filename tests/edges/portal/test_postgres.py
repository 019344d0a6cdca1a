"""PostgreSQL is supported: the migrations run on a real server and create the roles."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ADMIN_URL = os.environ.get(
    "PORTAL_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)


def test_migrations_run_on_postgresql() -> None:
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(
            ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True, connect_timeout=3
        )
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL reachable at {ADMIN_URL} (set PORTAL_TEST_POSTGRES_URL): {exc}")
    name = f"portal_test_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        base = ADMIN_URL.rsplit("/", 1)[0]
        env = {
            **os.environ,
            "DJANGO_DEBUG": "true",
            "DATABASE_URL": f"{base}/{name}",
            "DJANGO_SETTINGS_MODULE": "portal.settings",
        }
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        with psycopg.connect(f"{base.replace('postgres://', 'postgresql://')}/{name}") as conn:
            rows = conn.execute("SELECT name FROM auth_group ORDER BY name").fetchall()
        assert [row[0] for row in rows] == ["approvers", "pool-admins", "requesters", "viewers"]
    finally:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.close()
