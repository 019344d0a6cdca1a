"""Run a module's race tests again in a fresh pytest process on PostgreSQL.

SQLite serialises writers at BEGIN, so a race that only READ COMMITTED can lose shows up
on PostgreSQL alone. The rerun gets a database of its own (pytest-django creates and
drops test_<name> next to it) and a Redis of its own, so its queue is not the session's.
When no PostgreSQL answers, the calling test is skipped with the reason printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.db import connection

from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
ADMIN_URL = os.environ.get(
    "PORTAL_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
# Set in the rerun's environment; the module's fixtures check the database is PostgreSQL.
ON_POSTGRES_VARIABLE = "PORTAL_RACES_ON_POSTGRES"


# Not an xdist worker (tests/settings.py then reads the "main" Redis port set below), and not
# the session's broker.
INHERITED_NOT = ("PYTEST_XDIST_WORKER", "CELERY_BROKER_URL")


def rerunning_on_postgres() -> bool:
    return os.environ.get(ON_POSTGRES_VARIABLE) == "1"


def rerun_on_postgresql(module_file: str, rerun_test: str, expected_passed: int) -> None:
    """Run `module_file` without `rerun_test` on PostgreSQL; every other test must pass."""
    if connection.vendor == "postgresql":
        pytest.skip("this session runs on PostgreSQL already: the races above ran on it")
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(
            ADMIN_URL.replace("postgres://", "postgresql://"), connect_timeout=3
        ).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL reachable at {ADMIN_URL} (set PORTAL_TEST_POSTGRES_URL): {exc}")
    database = f"portal_races_{uuid.uuid4().hex[:8]}"
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTEST_XDIST_WORKER", "CELERY_BROKER_URL")
        },
        "DATABASE_URL": f"{ADMIN_URL.rsplit('/', 1)[0]}/{database}",
        "PORTAL_TEST_REDIS_PORT_main": str(free_port()),
        ON_POSTGRES_VARIABLE: "1",
    }
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", module_file, "-q", "-rs", "-p", "no:cacheprovider"),
            *("-k", f"not {rerun_test}"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"{expected_passed} passed" in output and "skipped" not in output, output
