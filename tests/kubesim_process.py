"""kubesim started as its own process over real HTTP, the way the portal and kubectl meet it."""

from __future__ import annotations

import atexit
import contextlib
import json
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kubernetes import client, config

from tests.kubesim_zygote import ForkedProcess, Zygote
from tests.servers import free_port, port_open, stop, wait_for

ROOT = Path(__file__).resolve().parent.parent
ADMIN_TOKEN = "kubesim-admin-token-for-tests"
READONLY_TOKEN = "kubesim-readonly-token-for-tests"


@dataclass
class Kubesim:
    url: str
    metrics_url: str
    kubeconfig: Path
    audit_log: Path
    process: ForkedProcess
    tls: bool
    # The kubeconfig context of an account that may read nodes and pods and write nothing.
    readonly_context: str = "kubesim-readonly"
    readonly_user: str = "kubesim-viewer"

    def api_client(self, *, read_only: bool = False) -> client.ApiClient:
        context = self.readonly_context if read_only else "kubesim"
        return config.new_client_from_config(config_file=str(self.kubeconfig), context=context)

    def core(self, *, read_only: bool = False) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client(read_only=read_only))

    def control(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to kubesim's control endpoints (faults, GPU overrides, exporter switch)."""
        request = urllib.request.Request(
            f"{self.url}/kubesim/{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
        )
        context = None
        if self.tls:
            import ssl

            context = ssl.create_default_context(
                cafile=str(self.kubeconfig.parent / "kubesim-tls" / "ca.crt")
            )
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return json.loads(response.read())

    def audit_events(self) -> list[dict[str, Any]]:
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line]

    def count(self, verb: str, resource: str = "nodes", name: str | None = None) -> int:
        return sum(
            1
            for event in self.audit_events()
            if event["verb"] == verb
            and event.get("objectRef", {}).get("resource") == resource
            and (name is None or event.get("objectRef", {}).get("name") == name)
        )


# Ports are picked free, then bound by another process: something else on the machine may
# take one in between. A start that meets "Address already in use" is tried again.
PORT_ATTEMPTS = 3


@contextlib.contextmanager
def kubesim_server(
    workdir: Path,
    *,
    scenario: str = "demo",
    nodes: int | None = None,
    tls: bool = False,
    extra: list[str] | None = None,
    start_timeout: float = 120,
) -> Iterator[Kubesim]:
    """kubesim serving `scenario` or `nodes` generated nodes; a large cluster seeds for
    minutes on a busy machine (`start_timeout`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    options = ["--nodes", str(nodes)] if nodes else ["--scenario", scenario]
    options += ["--tls"] if tls else []
    options += extra or []
    for attempt in range(PORT_ATTEMPTS):
        port, metrics_port = free_port(), free_port()
        process, log = _start(workdir, port, metrics_port, options)
        try:
            if _wait_serving(
                workdir,
                process,
                port,
                metrics_port,
                last=attempt == PORT_ATTEMPTS - 1,
                timeout=start_timeout,
            ):
                break
        except BaseException:
            stop(process)
            log.close()
            raise
        stop(process)
        log.close()
    try:
        scheme = "https" if tls else "http"
        yield Kubesim(
            f"{scheme}://127.0.0.1:{port}",
            f"http://127.0.0.1:{metrics_port}",
            workdir / "kubeconfig",
            workdir / "audit.log",
            process,
            tls,
        )
    finally:
        stop(process)
        log.close()


def _start(
    workdir: Path, port: int, metrics_port: int, options: list[str]
) -> tuple[ForkedProcess, IO[bytes]]:
    """`python -m kubesim serve ...`, forked from this test process's zygote (the same
    `main(argv)`, without a second of imports each time)."""
    argv = [
        "serve",
        *("--port", str(port), "--metrics-port", str(metrics_port)),
        *("--kubeconfig", str(workdir / "kubeconfig"), "--audit-log", str(workdir / "audit.log")),
        *("--token", ADMIN_TOKEN, "--readonly-token", READONLY_TOKEN),
        *options,
    ]
    # kubesim writes the kubeconfig once it serves: one left by an earlier start names
    # another port, and its presence must not count as this start's.
    (workdir / "kubeconfig").unlink(missing_ok=True)
    log = (workdir / "kubesim.log").open("wb")
    return _zygote().start(argv, ROOT, workdir / "kubesim.log"), log


_ZYGOTE: list[Zygote] = []


def _zygote() -> Zygote:
    if not _ZYGOTE:
        zygote = Zygote(Path(tempfile.mkdtemp(prefix="kubesim-zygote-")))
        atexit.register(stop, zygote.process)
        _ZYGOTE.append(zygote)
    return _ZYGOTE[0]


def _wait_serving(
    workdir: Path,
    process: ForkedProcess,
    port: int,
    metrics_port: int,
    *,
    last: bool,
    timeout: float,
) -> bool:
    """True once kubesim serves; False when a port was taken meanwhile (try again)."""
    kubeconfig = workdir / "kubeconfig"
    wait_for(
        lambda: (
            (kubeconfig.exists() and port_open(port) and port_open(metrics_port))
            or process.poll() is not None
        ),
        timeout=timeout,
        what="kubesim",
    )
    if process.poll() is None:
        return True
    output = (workdir / "kubesim.log").read_text()
    if "Address already in use" in output and not last:
        return False
    raise RuntimeError(f"kubesim exited: {output}")
