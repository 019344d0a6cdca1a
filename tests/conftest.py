from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import PrometheusServer, RedisServer, prometheus_server, redis_server


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with prometheus_server(tmp_path_factory.mktemp("prometheus")) as server:
        yield server
