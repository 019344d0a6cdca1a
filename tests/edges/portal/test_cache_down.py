"""Redis, as the shared cache, killed under a running portal: pages and the token API keep
answering from the database and say what is degraded; the API's rate limit fails open
with a logged warning (pools.common.guarded_cache)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from django.core.cache import cache, caches
from django.test import Client

from pools.common.guarded_cache import caches_setting
from pools.tokens import token_create
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, free_port, redis_server, stop

NODE = "a100-infer-000"
# Pages that read the cache (the metric figures); the others never touch it.
PAGES = ("/", "/pools/training/", "/pools/unassigned/", f"/nodes/{NODE}/")
OTHER_PAGES = ("/moves/", "/audit/", "/loans/")
API = ("/api/v1/summary/", "/api/v1/nodes/", f"/api/v1/nodes/{NODE}/", "/api/v1/pools/")


@pytest.mark.django_db
def test_with_redis_killed_pages_and_the_api_answer_and_say_what_is_degraded(
    settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    prometheus: PrometheusServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    demo_inventory()
    settings.PROMETHEUS_URL = prometheus.url
    settings.API_TOKEN_RATE = "1000/min"
    viewer = user_in("viewers", "vera")
    session = Client(raise_request_exception=False)
    session.force_login(viewer)
    token = api(token_create(user=viewer, name="script")[1])
    with redis_server(tmp_path) as redis:
        settings.CACHES = caches_setting(f"redis://127.0.0.1:{redis.port}/0")
        # Up: the cache works and nothing is said.
        response = session.get("/")
        assert response.status_code == 200
        assert "X-Portal-Degraded" not in response
        assert token.get("/api/v1/nodes/").status_code == 200
        assert cache.get("rl-probe") is None
        stop(redis.process)
    caplog.set_level(logging.WARNING)
    for path in PAGES:
        response = session.get(path)
        assert response.status_code == 200, path
        assert response["X-Portal-Degraded"] == "cache", path
        assert "Running degraded" in response.content.decode(), path
        assert "shared cache (Redis) is unreachable" in response.content.decode(), path
    for path in OTHER_PAGES:
        assert session.get(path).status_code == 200, path
    caplog.clear()
    for path in API:
        response = token.get(path)
        assert response.status_code == 200, (path, response.content)
        assert response["X-Portal-Degraded"] == "cache", path
    throttle_warnings = [r for r in caplog.records if "rate limit not enforced" in r.getMessage()]
    assert len(throttle_warnings) == len(API)
    assert any("cache unreachable" in r.getMessage() for r in caplog.records)
    # The rows come from the database as usual.
    assert any(n["name"] == NODE for n in token.get("/api/v1/nodes/").json()["results"])


@pytest.mark.django_db
def test_the_rate_limit_holds_with_redis_and_fails_open_without(
    settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "2/min"},
    }
    token = api(token_create(user=user_in("viewers", "vic"), name="script")[1])
    with redis_server(tmp_path) as redis:
        settings.CACHES = caches_setting(f"redis://127.0.0.1:{redis.port}/0")
        statuses = [token.get("/api/v1/pools/").status_code for _ in range(3)]
        assert statuses == [200, 200, 429]
        stop(redis.process)
    caplog.set_level(logging.WARNING)
    assert token.get("/api/v1/pools/").status_code == 200
    assert [r.levelname for r in caplog.records if "rate limit" in r.getMessage()] == ["WARNING"]


def test_one_redis_client_serves_every_operation_and_outlives_a_restart(
    settings,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    port = free_port()
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    with redis_server(tmp_path / "first", port):
        settings.CACHES = caches_setting(f"redis://127.0.0.1:{port}/0")
        backend = caches["default"]._cache
        assert backend.get_client() is backend.get_client(write=True)
        cache.set("kept", 1)
        assert cache.get("kept") == 1
    with redis_server(tmp_path / "second", port):
        assert cache.get("kept") is None  # a new, empty Redis, through the same client
        cache.set("kept", 2)
        assert cache.get("kept") == 2
