"""A configuration error stops manage.py, gunicorn and Celery alike: one line naming the
variable, what was expected and what was given (redacted), a non-zero exit, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[3]


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PORTAL_", "API_"))
    }
    clean.update({"DJANGO_DEBUG": "true", "DJANGO_SETTINGS_MODULE": "portal.settings", **env})
    return subprocess.run(
        argv, cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120, check=False
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], line: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [entry for entry in output.splitlines() if "configuration error" in entry]
    assert errors == [f"configuration error: {line}"], output


PROCESSES = {
    "manage.py": [sys.executable, "manage.py", "check"],
    "gunicorn": [
        sys.executable,
        "-m",
        "gunicorn",
        "portal.wsgi",
        "--workers",
        "1",
        "--bind",
        f"127.0.0.1:{free_port()}",
        "--no-control-socket",
    ],
    "celery worker": [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool", "solo"],
}


@pytest.mark.parametrize("process", PROCESSES)
def test_every_entry_point_prints_one_line_and_exits(process: str) -> None:
    result = run(PROCESSES[process], {"API_TOKEN_RATE": "lots"})
    assert_one_line_error(
        result,
        "API_TOKEN_RATE: expected a rate like 100/min (N/s, N/min, N/hour or N/day, N >= 1), "
        "got 'lots'",
    )


@pytest.mark.parametrize("process", PROCESSES)
def test_a_password_in_a_malformed_url_is_redacted_by_every_entry_point(process: str) -> None:
    result = run(PROCESSES[process], {"CELERY_BROKER_URL": "amqp://portal:hunter2@mq:5672//"})
    assert_one_line_error(
        result,
        "CELERY_BROKER_URL: scheme must be one of redis, rediss, got 'amqp://portal:***@mq:5672//'",
    )
    assert "hunter2" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        ("DJANGO_DEBUG", "maybe", "DJANGO_DEBUG: expected a boolean"),
        ("GPU_IDLE_WINDOW", "1 hour", "GPU_IDLE_WINDOW: expected a PromQL duration above zero"),
        ("API_TOKEN_RATE", "5/sausage", "API_TOKEN_RATE: expected a rate like 100/min"),
        (
            "PROMETHEUS_TIMEOUT",
            "0",
            "PROMETHEUS_TIMEOUT: expected a number from 0.1 to 60, got '0'",
        ),
        ("KUBE_TIMEOUT", "nan", "KUBE_TIMEOUT: expected a number from 0.1 to 300, got 'nan'"),
        ("PATCH_MAX_RETRIES", "1000", "PATCH_MAX_RETRIES: expected a whole number from 0 to 100"),
        ("INVENTORY_PAGE_SIZE", "lots", "INVENTORY_PAGE_SIZE: expected a whole number from 1"),
        ("MOVE_EXECUTION_DEADLINE_SECONDS", "5", "MOVE_EXECUTION_DEADLINE_SECONDS: expected a"),
        ("DEMO_PORT", "70000", "DEMO_PORT: expected a whole number from 1 to 65535, got 70000"),
        ("CELERY_TASK_SOFT_TIME_LIMIT", "2400", "CELERY_TASK_SOFT_TIME_LIMIT: expected less than"),
        ("LOG_LEVEL", "loud", "LOG_LEVEL: expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
        ("LOG_FORMAT", "xml", "LOG_FORMAT: expected one of text, json, got 'xml'"),
        ("LOCAL_LOGIN_ENABLED", "sometimes", "LOCAL_LOGIN_ENABLED: expected a boolean"),
        ("METRICS_TOKEN", "short", "METRICS_TOKEN: expected a secret of at least 16 characters"),
        ("TIME_ZONE", "Mars/Olympus", "TIME_ZONE: expected an IANA time zone"),
        ("DCGM_NODE_LABEL", "host-name", "DCGM_NODE_LABEL: expected a Prometheus label name"),
        ("READYZ_REQUIRED", "database,coffee", "READYZ_REQUIRED: expected a comma-separated list"),
        ("POOL_LABEL_KEY", "Not A Key", "POOL_LABEL_KEY: expected a label key"),
        ("POD_TEAM_LABEL", "my team", "POD_TEAM_LABEL: expected a label key"),
        ("POD_WORKLOAD_LABEL", "-kind", "POD_WORKLOAD_LABEL: expected a label key"),
        ("POD_HISTORY_DAYS", "0", "POD_HISTORY_DAYS: expected a whole number from 1 to 3650"),
        ("DJANGO_CSRF_TRUSTED_ORIGINS", "portal.example.com", "DJANGO_CSRF_TRUSTED_ORIGINS: exp"),
    ],
)
def test_each_kind_of_value_is_checked_at_start_up(name: str, value: str, line: str) -> None:
    result = run([sys.executable, "manage.py", "check"], {name: value})
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output
    assert output.strip().splitlines()[-1].startswith(f"configuration error: {line}"), output


def test_a_secret_is_never_echoed() -> None:
    result = run([sys.executable, "manage.py", "check"], {"METRICS_TOKEN": "tiny-secret"})
    assert result.returncode == 2
    assert "tiny-secret" not in result.stderr
    assert "got 11" in result.stderr
