"""The portal's metrics across processes: gunicorn workers add up (even those already
recycled), a restart starts from zero, and a real Celery worker's figures move when it runs
a move, served on its own port."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.test import Client

from pools.inventory import inventory_sync
from pools.models import MoveRequest
from tests.e2e.test_moves_e2e import approve, patches_by_node, request_move
from tests.kubesim_process import Kubesim
from tests.metrics_scrape import REQUEST_TIMEOUT, TOKEN, parse, scrape, value
from tests.moves_helpers import FINAL, wait_for_state
from tests.servers import RedisServer, free_port
from tests.web_process import gunicorn
from tests.workers import ROOT, celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]
UNMATCHED = {"view": "unmatched", "method": "GET", "status": "4xx"}


def unmatched_count(url: str) -> float:
    """Requests to no route: only this test sends them (the start-up polls ask /healthz)."""
    return value(
        scrape(f"{url}/metrics"), "portal_http_request_duration_seconds_count", **UNMATCHED
    )


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_gunicorn_workers_add_up_recycled_ones_included_and_a_restart_starts_afresh(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "multiproc"
    env = {"METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    # Each worker is replaced after 4 requests: 9 requests go through at least 3 processes.
    with gunicorn(tmp_path, workers=2, args=("--max-requests", "4"), **env) as web:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            assert set(pool.map(get, [f"{web.url}/no/such/page"] * 9)) == {404}
        pids = {path.stem.rsplit("_", 1)[1] for path in directory.glob("histogram_*.db")}
        assert len(pids) >= 3, pids  # recycled workers' figures stay in the sum
        # Whichever worker answers a scrape, it reports every worker's requests.
        assert {unmatched_count(web.url) for _ in range(4)} == {9}
    with gunicorn(tmp_path, name="web-again", workers=1, **env) as web:
        # The same directory, as an emptyDir outlives a container restart: emptied first.
        assert unmatched_count(web.url) == 0
        assert get(f"{web.url}/no/such/page") == 404
        assert unmatched_count(web.url) == 1


def worker_metrics(port: int) -> dict:  # type: ignore[type-arg]
    return scrape(f"http://127.0.0.1:{port}/metrics")


def test_a_worker_serves_its_figures_and_they_move_when_a_move_runs(
    cluster: Kubesim, redis: RedisServer, tmp_path: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.METRICS_TOKEN = TOKEN
    inventory_sync()
    directory = tmp_path / "worker-multiproc"
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"left by the previous container")
    port = free_port()
    env = {
        "METRICS_TOKEN": TOKEN,
        "METRICS_PORT": str(port),
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
    }
    move = request_move(["a100-reserve-000", "a100-reserve-001"], "training")
    with celery_worker(tmp_path, concurrency=2, **env):
        assert not (directory / "counter_1.db").exists()
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape(f"http://127.0.0.1:{port}/metrics", token="wrong-token-0123456789")
        assert refused.value.code == 401
        before = worker_metrics(port)
        approve(move)
        move = wait_for_state(move, FINAL)
        after = worker_metrics(port)
    assert move.state == MoveRequest.State.SUCCEEDED

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    patched = patches_by_node(cluster)
    assert patched == {"a100-reserve-000": [200], "a100-reserve-001": [200]}
    assert delta("portal_kube_patch_requests_total", outcome="ok", code="200") == 2
    assert delta("portal_move_duration_seconds_count", outcome="succeeded") == 1
    assert value(after, "portal_move_duration_seconds_bucket", outcome="succeeded", le="+Inf") == 1
    # The web's /metrics reads the moves' states from the database.
    web = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert value(parse(web.content.decode()), "portal_moves", state="succeeded") == 1


WATCHER = """
import os, pathlib, urllib.request
from pools.common import observability
from portal.metrics_process import metrics_process_start

directory = pathlib.Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
# Every instrument has labels: importing them opened no file of this process's.
assert not list(directory.glob(f"*_{os.getpid()}.db")), list(directory.iterdir())
metrics_process_start(what="inventory watcher")
observability.watch_lag_set(3.5, resource="pods")
request = urllib.request.Request(
    f"http://127.0.0.1:{os.environ['METRICS_PORT']}/metrics",
    headers={"Authorization": "Bearer " + os.environ["METRICS_TOKEN"]},
)
print(urllib.request.urlopen(request, timeout=10).read().decode())
"""


def test_a_watcher_empties_its_directory_and_serves_its_own_figures(tmp_path: Path) -> None:
    directory = tmp_path / "watcher-multiproc"
    directory.mkdir()
    # Left by the previous container: the same pid may come back, its values must not.
    (directory / "gauge_mostrecent_1.db").write_bytes(b"stale")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
        "METRICS_PORT": str(free_port()),
        "METRICS_TOKEN": TOKEN,
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", WATCHER],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    served = parse(result.stdout[result.stdout.index("# HELP") :])
    assert value(served, "portal_inventory_watch_lag_seconds", resource="pods") == 3.5
    assert not (directory / "gauge_mostrecent_1.db").exists()
