"""A real Celery worker, started as its own process against the tests' Redis and database."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children), mid-whatever."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def worker_env(**overrides: str) -> dict[str, str]:
    database = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"sqlite:///{database['NAME']}",
        "KUBECONFIG": settings.KUBECONFIG,
        "KUBE_CONTEXT": settings.KUBE_CONTEXT,
        "PATCH_BACKOFF_SECONDS": "0.01",
        "DRAIN_POLL_SECONDS": "0.2",
        "MOVE_LEASE_SECONDS": "30",
    }
    env.update(overrides)
    return env


@contextlib.contextmanager
def celery_worker(
    workdir: Path, *, concurrency: int = 2, name: str = "w1", **env: str
) -> Iterator[Worker]:
    log = workdir / f"worker-{name}.log"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            str(concurrency),
            "--hostname",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=worker_env(**env),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    worker = Worker(process, log)
    try:
        deadline = time.monotonic() + 60
        while b" ready." not in log.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start: {log.read_text()}")
            time.sleep(0.1)
        yield worker
    finally:
        worker.stop()
