"""Connections PostgreSQL dropped (a failover, a restart) are replaced, not answered with
500 (issue 25, R3): the pooled connection is health-checked before a request's first query.

The requests go through Django's WSGI handler in a process of its own, as under gunicorn:
its request signals close and check connections (the test client skips them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[3]
ADMIN_URL = os.environ.get(
    "PORTAL_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)

# Logs in, asks a page that reads the database, has PostgreSQL terminate every connection
# of the database but the killer's own, and asks the page again: one status a line.
SCRIPT = """
import os, django, django.db
django.setup()
import psycopg
from django.contrib.auth.models import User
from django.core.wsgi import get_wsgi_application
from django.test import Client, RequestFactory

app = get_wsgi_application()
client = Client()
client.force_login(User.objects.create_superuser("ops", "ops@example.com", "x"))
cookie = f"sessionid={client.cookies['sessionid'].value}"

def status(path):
    seen = []
    environ = RequestFactory(HTTP_HOST="localhost", HTTP_COOKIE=cookie).get(path).environ
    try:
        body = app(environ, lambda code, headers, exc_info=None: seen.append(code))
    except django.db.Error as exc:  # even the error page met the dead connection
        return type(exc).__name__
    b"".join(body)
    body.close()  # request_finished, as a WSGI server sends it
    return seen[0].split()[0]

print(status("/loans/"))
with psycopg.connect(os.environ["ADMIN_URL"], autocommit=True) as admin:
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (os.environ["DATABASE_NAME"],),
    )
print(status("/loans/"))
print(status("/loans/"))
"""


def test_every_connection_is_checked_before_a_requests_first_query() -> None:
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is True


def test_a_connection_postgresql_terminated_is_replaced_not_a_500() -> None:
    psycopg = pytest.importorskip("psycopg")
    admin_url = ADMIN_URL.replace("postgres://", "postgresql://")
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL reachable at {ADMIN_URL} (set PORTAL_TEST_POSTGRES_URL): {exc}")
    name = f"portal_test_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        env = {
            **os.environ,
            "DJANGO_DEBUG": "true",  # no collected static files needed
            "DATABASE_URL": f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}",
            "DATABASE_CONN_MAX_AGE": "60",
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "ADMIN_URL": admin_url,
            "DATABASE_NAME": name,
        }
        for command in (["manage.py", "migrate", "--noinput"], ["-c", SCRIPT]):
            result = subprocess.run(
                [sys.executable, *command],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert result.returncode == 0, result.stderr
        statuses = result.stdout.split()
        assert statuses == ["200", "200", "200"], f"{statuses}\n{result.stderr[-2000:]}"
    finally:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.close()
