from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, RedisServer, prometheus_server, redis_server


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The tests' own redis-server, on the port the Celery app was configured with."""
    port = int(os.environ["PORTAL_TEST_REDIS_PORT"])
    with redis_server(tmp_path_factory.mktemp("redis"), port) as server:
        yield server


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with prometheus_server(tmp_path_factory.mktemp("prometheus")) as server:
        yield server


@pytest.fixture
def kubesim(tmp_path: Path) -> Iterator[Kubesim]:
    """A fresh simulated cluster (the demo scenario) over plain HTTP, for one test."""
    with kubesim_server(tmp_path) as server:
        yield server


@pytest.fixture(scope="module")
def kubesim_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    """One simulated cluster for a module whose tests only read or touch their own nodes."""
    with kubesim_server(tmp_path_factory.mktemp("kubesim")) as server:
        yield server


@pytest.fixture
def cluster(settings, kubesim: Kubesim) -> Kubesim:  # type: ignore[no-untyped-def]
    """The portal pointed at a fresh kubesim (the demo scenario), with short backoffs."""
    settings.KUBECONFIG = str(kubesim.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    settings.PATCH_BACKOFF_SECONDS = 0.01
    return kubesim
