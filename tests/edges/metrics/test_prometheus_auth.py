"""Prometheus behind authentication: the real Prometheus with `--web.config.file` (TLS with
a private CA, a client certificate required, basic auth), and a gateway wanting a bearer
token and a tenant header (Mimir, Cortex, Thanos). Every way the portal reaches Prometheus
(the node figures, the charts, /readyz) sends what is configured, and a page says which
setting to check when Prometheus refuses."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client

from pools.metrics import source
from portal.env import env_headers
from tests.edges.portal.test_env_startup import assert_one_line_error, run
from tests.prometheus_secured import (
    PASSWORD,
    USERNAME,
    SecuredPrometheus,
    gateway,
    secured_prometheus,
)
from tests.servers import PrometheusServer

PROMETHEUS_SETTINGS = {
    "PROMETHEUS_BEARER_TOKEN": None,
    "PROMETHEUS_BEARER_TOKEN_FILE": "",
    "PROMETHEUS_USERNAME": "",
    "PROMETHEUS_PASSWORD": None,
    "PROMETHEUS_CA_BUNDLE": "",
    "PROMETHEUS_CLIENT_CERT": "",
    "PROMETHEUS_CLIENT_KEY": "",
    "PROMETHEUS_HEADERS": {},
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPrometheus]:
    with secured_prometheus(tmp_path_factory.mktemp("prom-secured")) as prom:
        yield prom


@pytest.fixture
def portal_settings(settings):  # type: ignore[no-untyped-def]
    for name, value in PROMETHEUS_SETTINGS.items():
        setattr(settings, name, value)
    settings.METRICS_CACHE_SECONDS = 0
    settings.PROMETHEUS_TIMEOUT = 5.0
    return settings


def through_tls(settings, prom: SecuredPrometheus) -> None:  # type: ignore[no-untyped-def]
    settings.PROMETHEUS_URL = prom.url
    settings.PROMETHEUS_CA_BUNDLE = str(prom.pki.ca)
    settings.PROMETHEUS_CLIENT_CERT = str(prom.pki.client_cert)
    settings.PROMETHEUS_CLIENT_KEY = str(prom.pki.client_key)
    settings.PROMETHEUS_USERNAME = USERNAME
    settings.PROMETHEUS_PASSWORD = PASSWORD


def one() -> source.InstantResult:
    return source.instant({"one": "vector(1)"}, use_cache=False)


def test_basic_auth_and_tls_with_a_client_certificate(
    secured: SecuredPrometheus, portal_settings
) -> None:  # type: ignore[no-untyped-def]
    through_tls(portal_settings, secured)
    result = one()
    assert result.error is None
    assert [s.value for s in result.series["one"]] == [1.0]
    history = source.history_series(
        "vector(2)", span=timedelta(minutes=10), step=timedelta(minutes=1)
    )
    assert history.error is None and len(history.series) == 1
    assert {v for _, v in history.series[0][1]} == {2.0}
    values, error = source.instant_node_values(
        {"v": 'label_replace(vector(3), "Hostname", "n1", "", "")'}, "Hostname"
    )
    assert error is None and list(values["v"]) == [("n1", 3.0)]
    source.prometheus_ready()  # raises when refused


@pytest.mark.django_db
def test_readyz_reaches_the_secured_prometheus(
    secured: SecuredPrometheus,
    portal_settings,
    redis,  # type: ignore[no-untyped-def]
) -> None:
    through_tls(portal_settings, secured)
    portal_settings.CELERY_BROKER_URL = redis.url
    body = json.loads(Client().get("/readyz").content)
    assert body["checks"]["prometheus"]["ok"] is True, body["checks"]["prometheus"]
    assert body["checks"]["prometheus"]["detail"].startswith(f"{secured.url} ready;")


def test_each_missing_piece_is_named(secured: SecuredPrometheus, portal_settings) -> None:  # type: ignore[no-untyped-def]
    through_tls(portal_settings, secured)
    portal_settings.PROMETHEUS_PASSWORD = "wrong-password-0123"
    assert one().error == (
        f"Prometheus at {secured.url} refused the portal's credentials (HTTP 401): check "
        "PROMETHEUS_BEARER_TOKEN (or its _FILE), or PROMETHEUS_USERNAME and "
        "PROMETHEUS_PASSWORD"
    )
    with pytest.raises(source.MetricsError, match=r"refused the portal's credentials \(HTTP 401\)"):
        source.prometheus_ready()

    through_tls(portal_settings, secured)
    portal_settings.PROMETHEUS_CA_BUNDLE = ""  # the system's CAs do not know the private CA
    error = one().error or ""
    assert error.startswith(
        f"TLS with Prometheus at {secured.url} failed (check PROMETHEUS_CA_BUNDLE and "
        "PROMETHEUS_CLIENT_CERT): [SSL: CERTIFICATE_VERIFY_FAILED]"
    ), error

    through_tls(portal_settings, secured)
    portal_settings.PROMETHEUS_CLIENT_CERT = str(secured.pki.stranger_cert)
    portal_settings.PROMETHEUS_CLIENT_KEY = str(secured.pki.stranger_key)
    assert (one().error or "").startswith(f"TLS with Prometheus at {secured.url} failed")

    through_tls(portal_settings, secured)
    portal_settings.PROMETHEUS_CLIENT_CERT = portal_settings.PROMETHEUS_CLIENT_KEY = ""
    assert (one().error or "").startswith(f"TLS with Prometheus at {secured.url} failed")


def test_a_bearer_token_and_a_tenant_header_through_a_gateway(
    prometheus: PrometheusServer, portal_settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with gateway(prometheus.url, {"first-token-0123456789"}) as gate:
        portal_settings.PROMETHEUS_URL = gate.url
        portal_settings.PROMETHEUS_BEARER_TOKEN = "first-token-0123456789"
        portal_settings.PROMETHEUS_HEADERS = {"X-Scope-OrgID": "gpu-team"}
        assert one().error is None
        assert (gate.passed, gate.refused) == ({"gpu-team": 1}, 0)

        # From a file, read again when the token is rotated.
        token_file = tmp_path / "token"
        token_file.write_text("first-token-0123456789\n")
        portal_settings.PROMETHEUS_BEARER_TOKEN = "first-token-0123456789"
        portal_settings.PROMETHEUS_BEARER_TOKEN_FILE = str(token_file)
        assert one().error is None
        gate.tokens = {"second-token-0123456789"}
        token_file.write_text("second-token-0123456789\n")
        later = time.time() + 5
        os.utime(token_file, (later, later))  # a new mtime whatever the clock's resolution
        assert one().error is None
        assert (gate.passed, gate.refused) == ({"gpu-team": 3}, 0)

        portal_settings.PROMETHEUS_HEADERS = {}
        assert "refused the portal's credentials (HTTP 401)" in (one().error or "")
        assert gate.refused == 1


BAD_SETTINGS = [
    (
        {"PROMETHEUS_USERNAME": "portal"},
        "PROMETHEUS_PASSWORD: basic auth needs both PROMETHEUS_USERNAME and "
        "PROMETHEUS_PASSWORD (or its _FILE)",
    ),
    (
        {
            "PROMETHEUS_USERNAME": "portal",
            "PROMETHEUS_PASSWORD": "pw",
            "PROMETHEUS_BEARER_TOKEN": "t",
        },
        "PROMETHEUS_BEARER_TOKEN: set a bearer token or basic auth (PROMETHEUS_USERNAME), not both",
    ),
    (
        {"PROMETHEUS_CLIENT_KEY": "/etc/hostname"},
        "PROMETHEUS_CLIENT_KEY: needs PROMETHEUS_CLIENT_CERT, its certificate",
    ),
    (
        {"PROMETHEUS_CA_BUNDLE": "/nonexistent/ca.pem"},
        "PROMETHEUS_CA_BUNDLE: cannot read /nonexistent/ca.pem: No such file or directory",
    ),
    (
        {"PROMETHEUS_BEARER_TOKEN_FILE": "/nonexistent/token"},
        "PROMETHEUS_BEARER_TOKEN_FILE: cannot read /nonexistent/token: No such file or directory",
    ),
    (
        {"PROMETHEUS_HEADERS": "X-Scope-OrgID"},
        "PROMETHEUS_HEADERS: expected comma-separated Name=value pairs like "
        "X-Scope-OrgID=team-a, got 'X-Scope-OrgID'",
    ),
    (
        {"PROMETHEUS_HEADERS": "X-Scope-OrgID=a,Authorization=Bearer x"},
        "PROMETHEUS_HEADERS: Authorization is not set here (got it in PROMETHEUS_HEADERS)",
    ),
    (
        {"PROMETHEUS_URL": "https://u:secret@prom:9090", "PROMETHEUS_BEARER_TOKEN": "t"},
        "PROMETHEUS_URL: carries a user and password: give them one way only",
    ),
]


@pytest.mark.parametrize(("env", "line"), BAD_SETTINGS)
def test_a_malformed_prometheus_setting_stops_the_process_naming_it(
    env: dict[str, str], line: str
) -> None:
    result = run([sys.executable, "manage.py", "check"], env)
    assert_one_line_error(result, line)
    assert "secret" not in result.stdout + result.stderr


def test_headers_are_read_as_name_value_pairs() -> None:
    assert env_headers("H", {"H": "X-Scope-OrgID=team-a, X-Extra = a=b"}) == {
        "X-Scope-OrgID": "team-a",
        "X-Extra": "a=b",
    }
