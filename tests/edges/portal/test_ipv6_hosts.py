"""An IPv6 cluster: the chart puts the pod's own IP (`$(POD_IP)`, a bare IPv6 address) in
DJANGO_ALLOWED_HOSTS, and the kubelet's probes and Prometheus's scrapes send
`Host: [ip]:port`. gunicorn on [::1], as production starts it: the probes and the scrape
answer, not 400."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from portal.env import env_hosts
from tests.workers import ROOT, worker_env

TOKEN = "ipv6-metrics-token-0123456789"


def test_an_ipv6_address_is_allowed_as_its_host_header_writes_it() -> None:
    hosts = env_hosts("H", [], {"H": "portal.example.com,fd00:10:244::1b,[::1],10.0.0.7"})
    assert hosts == ["portal.example.com", "[fd00:10:244::1b]", "[::1]", "10.0.0.7"]
    # The long form of an address is matched as the kubelet writes it: compressed.
    assert env_hosts("H", [], {"H": "FD00:0010:0244:0000:0000:0000:0000:001B"}) == [
        "[fd00:10:244::1b]"
    ]


def free_port_on(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def status(url: str, **headers: str) -> int:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


@contextlib.contextmanager
def gunicorn_at(workdir: Path, host: str, **env: str) -> Iterator[str]:
    """gunicorn bound to `host` (an IPv6 address or IPv4), its URL once it accepts
    connections (whatever it answers: the test asks)."""
    port = free_port_on(host)
    bind = f"[{host}]" if ":" in host else host
    log = workdir / "web.log"
    argv = [sys.executable, "-m", "gunicorn", "portal.wsgi:application"]
    argv += ["--bind", f"{bind}:{port}", "--workers", "1", "--no-control-socket"]
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=worker_env(**env),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://{bind}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection((host, port), timeout=1).close()
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not start: {log.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.django_db(transaction=True)
def test_probes_and_scrapes_by_the_pods_ipv6_address_answer(tmp_path: Path) -> None:
    # As the chart writes it once the kubelet has expanded $(POD_IP).
    with gunicorn_at(
        tmp_path,
        "::1",
        DJANGO_ALLOWED_HOSTS="gpu-portal.example.com,::1",
        METRICS_TOKEN=TOKEN,
        READYZ_REQUIRED="database",
    ) as url:
        assert status(f"{url}/healthz") == 200
        assert status(f"{url}/readyz") == 200
        assert status(f"{url}/metrics", Authorization=f"Bearer {TOKEN}") == 200
        # Any other host is still refused.
        assert status(f"{url}/healthz", Host="evil.example.com") == 400
