"""The API's rate limit on a real Redis: exact when a token's requests arrive at once, and
one round trip a request (pools.api.permissions.ApiTokenThrottle)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis as redis_client

from pools.api.permissions import ApiTokenThrottle
from pools.common.guarded_cache import caches_setting
from tests.servers import redis_server

LIMIT = 10


@pytest.fixture
def throttled_cache(settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": f"{LIMIT}/min"},
    }
    with redis_server(tmp_path) as server:
        settings.CACHES = caches_setting(f"redis://127.0.0.1:{server.port}/0")
        yield redis_client.Redis(port=server.port)


def a_request(token: str) -> SimpleNamespace:
    # What the throttle reads of a DRF request: the authenticated token.
    return SimpleNamespace(auth=SimpleNamespace(key_hash=token * 64))


def test_requests_at_once_get_exactly_the_limit(throttled_cache: redis_client.Redis) -> None:
    clients = 40
    start = threading.Barrier(clients)
    answers: list[tuple[bool, float | None]] = []
    lock = threading.Lock()

    def ask() -> None:
        throttle = ApiTokenThrottle()
        start.wait()
        allowed = throttle.allow_request(a_request("a"), None)  # type: ignore[arg-type]
        with lock:
            answers.append((allowed, throttle.wait()))

    threads = [threading.Thread(target=ask) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(allowed for allowed, _ in answers) == LIMIT
    waits = [wait for allowed, wait in answers if not allowed]
    assert all(wait is not None and 0 < wait <= 120 for wait in waits), waits
    # Another token has its own count.
    assert ApiTokenThrottle().allow_request(a_request("b"), None)  # type: ignore[arg-type]


def test_a_request_is_one_increment_and_one_read_in_one_round_trip(
    throttled_cache: redis_client.Redis,
) -> None:
    def allowed() -> bool:
        return ApiTokenThrottle().allow_request(a_request("c"), None)  # type: ignore[arg-type]

    assert allowed()  # the cache's connection is open
    throttled_cache.config_resetstat()
    reads_before = throttled_cache.info("stats")["total_reads_processed"]
    for _ in range(LIMIT - 1):
        assert allowed()
    reads = throttled_cache.info("stats")["total_reads_processed"] - reads_before
    stats = throttled_cache.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): stat["calls"] for name, stat in stats.items()}
    # No list of request times read and written back: an increment, its expiry, a read...
    assert {name: calls.get(name, 0) for name in ("incrby", "expire", "get", "set")} == {
        "incrby": LIMIT - 1,
        "expire": LIMIT - 1,
        "get": LIMIT - 1,
        "set": 0,
    }
    # ... sent together: one read of the server's a request (and one for the INFO asking).
    assert reads == LIMIT - 1 + 1
    assert not allowed()
