"""No password from a URL reaches a probe, a page, the API, a settings error or a log."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from pools.core.redact import RedactSecretsFilter, redact_url
from pools.models import Node, Pool
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, RedisServer, free_port

ROOT = Path(__file__).resolve().parents[3]
SECRET = "s3cr3t-Pa55"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:s3cr3t@host:9090", "http://user:***@host:9090"),
        ("redis://:s3cr3t@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        (
            "unreachable at https://u:s3cr3t@prom.example/x: refused",
            "unreachable at https://u:***@prom.example/x: refused",
        ),
        # An unescaped "@" in the password still ends at the host.
        ("postgres://portal:s3@cr3t@db:5432/portal", "postgres://portal:***@db:5432/portal"),
        # A token as the user name, alone or before a password.
        ("https://ghp_s3cr3tT0ken0123456789abcdef@git.example/r", "https://***@git.example/r"),
        ("https://ghp_s3cr3tT0ken0123:x-oauth-basic@git.example", "https://***:***@git.example"),
        ("redis://h:6379/0?password=s3cr3t&db=1", "redis://h:6379/0?password=***&db=1"),
        ("host=db user=portal password=s3cr3t", "host=db user=portal password=***"),
        ("got 'postgres://u:s3cr3t@h:port/db'", "got 'postgres://u:***@h:port/db'"),
    ],
)
def test_credentials_are_hidden(text: str, expected: str) -> None:
    assert redact_url(text) == expected
    assert "s3cr3t" not in redact_url(text)


@pytest.mark.parametrize(
    "text",
    [
        "http://127.0.0.1:9090",
        "postgres://postgres@127.0.0.1:5432/postgres",  # an account name is no secret
        "Prometheus did not answer within 2s",
        "mail ops@example.com about http://prom:9090/graph",
    ],
)
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert redact_url(text) == text


def test_log_records_and_their_tracebacks_are_redacted() -> None:
    try:
        raise ConnectionError(f"cannot reach redis://:{SECRET}@cache:6379/1")
    except ConnectionError:
        record = logging.LogRecord(
            "pools", logging.ERROR, __file__, 1, "broker %s down", ("redis://:x@b/0",), None
        )
        record.exc_info = sys.exc_info()
    assert RedactSecretsFilter().filter(record) is True
    line = logging.Formatter().format(record)
    assert "broker redis://:***@b/0 down" in line
    assert "redis://:***@cache:6379/1" in line
    assert SECRET not in line


# --- the public probe, the pages and the API, with credentials in PROMETHEUS_URL ---


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://prom-user:{SECRET}@")


def everything_shown(client: Client) -> dict[str, str]:
    Node.objects.create(
        name="gpu-a",
        pool=Pool.objects.get(name="training"),
        pool_label="training",
        gpu_model="NVIDIA-A100-SXM4-80GB",
        gpu_count=8,
        gpu_allocatable=8,
        ready=True,
        last_seen=timezone.now(),
    )
    client.force_login(user_in("viewers"))
    shown = {}
    for path in ("/readyz", "/", "/?partial=live", "/pools/training/", "/nodes/gpu-a/"):
        shown[path] = client.get(path).content.decode()
    summary = client.get("/api/v1/summary/")
    assert summary.status_code == 200
    shown["/api/v1/summary/"] = summary.content.decode()
    return shown


@pytest.mark.django_db
def test_prometheus_password_shown_nowhere_when_unreachable(
    client: Client, settings, redis: RedisServer
) -> None:  # type: ignore[no-untyped-def]
    settings.CELERY_BROKER_URL = redis.url
    settings.METRICS_CACHE_SECONDS = 0
    settings.PROMETHEUS_URL = with_credentials(f"http://127.0.0.1:{free_port()}")
    shown = everything_shown(client)
    for path, body in shown.items():
        assert SECRET not in body, path
    readyz = json.loads(shown["/readyz"])["checks"]["prometheus"]
    assert "Prometheus unreachable at http://prom-user:***@127.0.0.1" in readyz["error"]
    summary = json.loads(shown["/api/v1/summary/"])
    assert summary["metrics_error"].startswith("Prometheus unreachable at http://prom-user:***@")
    assert "metrics unavailable" in shown["/"].lower()
    assert "prom-user:***@" in shown["/"]


@pytest.mark.django_db
def test_prometheus_password_shown_nowhere_when_reachable(
    client: Client, settings, redis: RedisServer, prometheus: PrometheusServer
) -> None:  # type: ignore[no-untyped-def]
    settings.CELERY_BROKER_URL = redis.url
    settings.METRICS_CACHE_SECONDS = 0
    settings.PROMETHEUS_URL = with_credentials(prometheus.url)
    shown = everything_shown(client)
    for path, body in shown.items():
        assert SECRET not in body, path
    readyz = json.loads(shown["/readyz"])["checks"]["prometheus"]
    assert (readyz["ok"], readyz["required"]) == (True, False)
    # The address with its password masked, then what the portal reads (recorded or raw).
    redacted = prometheus.url.replace("http://", "http://prom-user:***@")
    assert readyz["detail"].startswith(f"{redacted} ready; "), readyz
    assert json.loads(shown["/api/v1/summary/"])["metrics_error"] is None


# --- start-up errors and logs, in fresh processes ---


def run_manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PORTAL_"))}
    clean.update({"DJANGO_DEBUG": "true", "DJANGO_SETTINGS_MODULE": "portal.settings", **env})
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", f"postgres://portal:{SECRET}@db:port/portal"),
        ("DATABASE_URL", f"postgress://portal:{SECRET}@db:5432/portal"),
        ("CELERY_BROKER_URL", f"amqp://portal:{SECRET}@broker:5672//"),
        ("CELERY_BROKER_URL", f"redis://:{SECRET}@broker:99999/0"),
        ("CACHE_URL", f"memcached://u:{SECRET}@cache:11211"),
        ("PROMETHEUS_URL", f"ftp://u:{SECRET}@prom:9090"),
    ],
)
def test_a_malformed_url_is_refused_without_its_password(name: str, value: str) -> None:
    result = run_manage(["check"], {name: value})
    assert result.returncode != 0
    assert f"{name}:" in result.stderr
    assert ":***@" in result.stderr
    assert SECRET not in result.stderr + result.stdout


def test_a_log_line_never_carries_a_password() -> None:
    code = (
        "import logging; "
        f"logging.getLogger('pools').warning('broker at %s is down', 'redis://:{SECRET}@b:6379/0')"
    )
    result = run_manage(["shell", "-c", code], {})
    assert result.returncode == 0, result.stderr
    assert "broker at redis://:***@b:6379/0 is down" in result.stderr
    assert SECRET not in result.stderr
