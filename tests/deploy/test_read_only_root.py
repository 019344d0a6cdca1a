"""The chart's commands run on a read-only root filesystem, writing only where it mounts.

No container engine runs here, so each command runs as the chart renders it inside a
private mount namespace (`unshare`) whose root is remounted read-only, with a fresh tmpfs
on /tmp: the pod's emptyDir. /dev/shm stays the machine's tmpfs, as the web pod's memory
emptyDir. The kernel refuses writes to a read-only mount for root too. The working
directory is the repository, as /app is in the image, and static files are collected into
it first, as the image build does. Only the listen address changes, to a free loopback port.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.chart import ROOT, default_docs, deployment, named
from tests.kubesim_process import Kubesim
from tests.servers import RedisServer, free_port

BIN = Path(sys.executable).parent
POD_IP = "127.0.0.1"
# / read-only, a fresh /tmp; then the command itself, in place of the shell.
POD_SHELL = 'mount -o remount,bind,ro / && mount -t tmpfs -o size=256m tmpfs /tmp && exec "$@"'
IN_POD = ["unshare", "--mount", "--propagation", "private", "sh", "-c", POD_SHELL, "pod"]
READ_ONLY_ERRORS = re.compile(r"Read-only file system|Errno 30|EROFS")


@pytest.fixture(scope="module", autouse=True)
def mount_namespaces() -> None:
    if any(Path("/tmp") in (p.resolve(), *p.resolve().parents) for p in (ROOT, BIN)):
        # The pod's fresh /tmp would hide the checkout or the interpreter it runs.
        pytest.skip(f"the checkout ({ROOT}) or its Python ({BIN}) is under /tmp")
    probe = subprocess.run(
        [*IN_POD, "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make a private read-only mount namespace here: {probe.stderr.strip()}")


@pytest.fixture(scope="module")
def image_build() -> None:
    """The image's build step: collectstatic into the application directory."""
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=base_env(None) | {"DJANGO_SECRET_KEY": "collectstatic-only"},
        check=True,
        capture_output=True,
        timeout=120,
    )


def base_env(redis: RedisServer | None) -> dict[str, str]:
    broker = f"redis://127.0.0.1:{redis.port}" if redis else "redis://127.0.0.1:9"
    config = named(default_docs(), "ConfigMap", "rel-gpu-pool-portal")["data"]
    return {
        **config,
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(ROOT),  # the image's home is /app: read-only too
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "DJANGO_ALLOWED_HOSTS": POD_IP,
        "DJANGO_SECRET_KEY": "read-only-root-test-" + "x" * 40,
        "DATABASE_URL": "sqlite:////tmp/portal.sqlite3",
        "CELERY_BROKER_URL": f"{broker}/0",
        "CACHE_URL": f"{broker}/1",
        "METRICS_TOKEN": "read-only-root-test-token",
    }


def pod_command(component: str) -> list[str]:
    docs = default_docs()
    if component == "migrations":
        container = named(docs, "Job", "rel-gpu-pool-portal-migrations")
    else:
        container = deployment(docs, component)
    command = list(container["spec"]["template"]["spec"]["containers"][0]["command"])
    program = {"python": sys.executable}.get(command[0], str(BIN / command[0]))
    return [program, *command[1:]]


class Pod:
    """One command in its own read-only mount namespace, its output collected as it runs."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [*IN_POD, *command],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.output):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.reader.join(timeout=5)
                pytest.fail(f"never printed {pattern!r}:\n{self.output}")
            time.sleep(0.1)

    def stop(self) -> str:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=5)
        return self.output


@pytest.fixture
def pods() -> Iterator[list[Pod]]:
    started: list[Pod] = []
    yield started
    for pod in started:
        if pod.process.poll() is None:
            pod.stop()


def test_the_migration_job_runs(redis: RedisServer) -> None:
    result = subprocess.run(
        [*IN_POD, *pod_command("migrations")],
        cwd=ROOT,
        env=base_env(redis),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Applying pools." in result.stdout
    assert not READ_ONLY_ERRORS.search(result.stdout + result.stderr)


def get(port: int, path: str) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://{POD_IP}:{port}{path}",
        # What the Ingress controller adds: the portal trusts it behind a TLS proxy.
        headers={"X-Forwarded-Proto": "https"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read().decode(errors="replace")


def test_the_web_pod_serves_pages_and_static_files(
    image_build: None, redis: RedisServer, pods: list[Pod]
) -> None:
    port = free_port()
    command = [
        f"--bind={POD_IP}:{port}" if arg.startswith("--bind=") else arg
        for arg in pod_command("web")
    ]
    web = Pod(command, base_env(redis))
    pods.append(web)
    web.wait_for(r"Booting worker")
    deadline = time.monotonic() + 30
    while True:
        try:
            status, body = get(port, "/healthz")
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert (status, body) == (200, "ok\n")
    status, page = get(port, "/login/")
    assert status == 200
    stylesheet = re.search(r'href="(/static/[^"]+\.css)"', page)
    assert stylesheet, page[:2000]
    # A hashed name: the manifest collected at build time is what serves it.
    assert re.search(r"\.[0-9a-f]{12}\.css$", stylesheet.group(1))
    assert get(port, stylesheet.group(1))[0] == 200
    output = web.stop()
    assert not READ_ONLY_ERRORS.search(output), output


def test_the_worker_pod_starts(redis: RedisServer, pods: list[Pod]) -> None:
    worker = Pod(pod_command("worker"), base_env(redis))
    pods.append(worker)
    worker.wait_for(r"celery@\S+ ready\.")
    output = worker.stop()
    assert not READ_ONLY_ERRORS.search(output), output


def test_the_beat_pod_keeps_its_schedule_in_tmp(redis: RedisServer, pods: list[Pod]) -> None:
    # Debug logging shows the scheduler set up: the schedule file is open by then.
    beat = Pod([*pod_command("beat"), "--loglevel=DEBUG"], base_env(redis))
    pods.append(beat)
    beat.wait_for(r"beat: Ticking with max interval")
    output = beat.stop()
    assert not READ_ONLY_ERRORS.search(output), output


def test_the_watcher_pod_lists_and_watches_the_cluster(
    redis: RedisServer, kubesim: Kubesim, pods: list[Pod]
) -> None:
    # In the cluster the credentials are a mounted secret; here the kubeconfig is written
    # into the pod's own /tmp (the machine's /tmp is hidden by the fresh tmpfs). The pod's
    # database is on that /tmp too, so the migrations run first in the same namespace.
    mount_and_migrate = (
        'printf "%s" "$POD_KUBECONFIG" > /tmp/kubeconfig'
        f" && {sys.executable} manage.py migrate --verbosity 0"
        ' && exec "$@"'
    )
    env = base_env(redis) | {
        "POD_KUBECONFIG": kubesim.kubeconfig.read_text(),
        "KUBECONFIG": "/tmp/kubeconfig",
        "KUBE_IN_CLUSTER": "false",  # no service account mounted here
    }
    watcher = Pod(["sh", "-c", mount_and_migrate, "watcher", *pod_command("watcher")], env)
    pods.append(watcher)
    watcher.wait_for(r"holds the inventory lease", timeout=120)
    watcher.wait_for(r"listed \d+ GPU nodes at resourceVersion")
    watcher.wait_for(r"listed pods at resourceVersion \S+: \d+ GPU pods")
    output = watcher.stop()
    assert not READ_ONLY_ERRORS.search(output), output
    assert "Traceback" not in output, output
