"""The web as it runs in production: gunicorn, started as its own process group against the
tests' database and Redis (gunicorn.conf.py is read from the repository, as in the image)."""

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

from tests.servers import free_port, http_ok
from tests.workers import ROOT, worker_env


@dataclass
class Web:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@contextlib.contextmanager
def gunicorn(
    workdir: Path, *, name: str = "web", workers: int = 2, args: tuple[str, ...] = (), **env: str
) -> Iterator[Web]:
    port = free_port()
    log = workdir / f"{name}.log"
    argv = [sys.executable, "-m", "gunicorn", "portal.wsgi:application"]
    argv += ["--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--no-control-socket"]
    process = subprocess.Popen(
        [*argv, *args],
        cwd=ROOT,
        env=worker_env(**env),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    web = Web(port, process, log)
    try:
        wait_until_serving(f"{web.url}/healthz", process, log)
        yield web
    finally:
        web.stop()


def wait_until_serving(
    url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60
) -> None:
    """Polls until the URL answers, one request at a time. gunicorn listens before its
    workers have booted, so a request waits in the backlog; abandoning it after a second and
    sending another would queue many, and a worker started with --max-requests spends them
    all on polls nobody reads any more, is recycled, and the next one does the same."""
    deadline = time.monotonic() + timeout
    while not http_ok(url, timeout=max(1.0, deadline - time.monotonic())):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"gunicorn did not start: {log.read_text()}")
        time.sleep(0.1)
