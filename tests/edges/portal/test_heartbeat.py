"""Liveness of the processes that serve no HTTP: the Celery worker, beat and the inventory
watcher renew a heartbeat file from their own main loop, and the probe the chart and compose
run (`python -m pools.common.heartbeat FILE MAX_AGE`) fails once a process hangs (here: stopped
with SIGSTOP) and passes again once it runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pools.common.heartbeat import heartbeat_problem, main
from tests.deploy.chart import default_docs, deployment
from tests.deploy.test_compose import compose
from tests.kubesim_process import Kubesim
from tests.servers import RedisServer
from tests.workers import ROOT, worker_env

MAX_AGE = "3"


def probe(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pools.common.heartbeat", str(path), MAX_AGE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_probe_passes_fresh_and_fails_old_or_missing(tmp_path: Path) -> None:
    beat = tmp_path / "heartbeat"
    assert heartbeat_problem(str(beat), 60) == (
        f"no heartbeat at {beat}: the process has not renewed it once"
    )
    beat.touch()
    assert heartbeat_problem(str(beat), 60) is None
    assert heartbeat_problem(str(beat), 60, now=beat.stat().st_mtime + 61) == (
        f"heartbeat {beat} last renewed 61s ago, over 60s: hung"
    )
    assert main([str(beat), "60"]) == 0
    assert main([str(beat)]) == 2 and main([str(beat), "soon"]) == 2


def eventually(check, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextlib.contextmanager
def started(argv: list[str], log: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=worker_env(**env),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def hang_and_recover(process: subprocess.Popen[bytes], beat: Path, log: Path) -> None:
    eventually(lambda: probe(beat).returncode == 0, f"a first heartbeat ({log.read_text()})")
    renewed = beat.stat().st_mtime_ns
    eventually(lambda: beat.stat().st_mtime_ns != renewed, "the heartbeat renewed")
    os.killpg(process.pid, signal.SIGSTOP)  # hung: nothing in it runs
    eventually(lambda: probe(beat).returncode == 1, "the probe to fail")
    assert "hung" in probe(beat).stderr
    os.killpg(process.pid, signal.SIGCONT)
    eventually(lambda: probe(beat).returncode == 0, "the probe to pass again")


HEARTBEAT = {"HEARTBEAT_SECONDS": "0.2"}


@pytest.mark.django_db(transaction=True)
def test_a_hung_worker_fails_its_probe(tmp_path: Path, redis: RedisServer) -> None:
    beat, log = tmp_path / "heartbeat", tmp_path / "worker.log"
    argv = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--concurrency", "1"]
    argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    with started(argv, log, HEARTBEAT_FILE=str(beat), **HEARTBEAT) as process:
        hang_and_recover(process, beat, log)


@pytest.mark.django_db(transaction=True)
def test_a_hung_beat_fails_its_probe(tmp_path: Path, redis: RedisServer) -> None:
    beat, log = tmp_path / "heartbeat", tmp_path / "beat.log"
    argv = [sys.executable, "-m", "celery", "-A", "portal", "beat", "-s", str(tmp_path / "db")]
    with started(argv, log, HEARTBEAT_FILE=str(beat), **HEARTBEAT) as process:
        hang_and_recover(process, beat, log)


@pytest.mark.django_db(transaction=True)
def test_a_hung_watcher_fails_its_probe(tmp_path: Path, cluster: Kubesim) -> None:
    beat, log = tmp_path / "heartbeat", tmp_path / "watcher.log"
    argv = [sys.executable, "manage.py", "watch_inventory"]
    with started(
        argv, log, HEARTBEAT_FILE=str(beat), INVENTORY_LEASE_SECONDS="3", **HEARTBEAT
    ) as process:
        hang_and_recover(process, beat, log)


def test_the_chart_and_compose_probe_each_process_by_its_heartbeat() -> None:
    docs = default_docs()
    services = compose()["services"]
    for component, max_age in (("worker", "60"), ("beat", "60"), ("watcher", "180")):
        container = deployment(docs, component)["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["HEARTBEAT_FILE"] == "/tmp/heartbeat", component
        command = ["python", "-m", "pools.common.heartbeat", "/tmp/heartbeat", max_age]
        assert container["livenessProbe"]["exec"]["command"] == command, component
        assert container["startupProbe"]["exec"]["command"] == command, component
        service = services[component]
        assert service["environment"]["HEARTBEAT_FILE"] == "/tmp/heartbeat", component
        assert service["healthcheck"]["test"] == ["CMD", *command], component
        # The rest of the shared environment is kept.
        assert service["environment"]["CELERY_BROKER_URL"] == "redis://redis:6379/0"
    web = deployment(docs, "web")["spec"]["template"]["spec"]["containers"][0]
    assert "HEARTBEAT_FILE" not in {e["name"] for e in web["env"]}  # probed over HTTP
