"""The real control plane (kube-apiserver, etcd, kube-scheduler, kube-controller-manager,
built from upstream by `controlplane`) with kubesim as the kubelets of the demo scenario's
nodes. `RealCluster` answers the same calls as `tests.kubesim_process.Kubesim`, so a test
written for one backend runs on the other.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from controlplane.launch import ControlPlane, Options, die_with_parent, running
from tests.servers import free_port, stop, wait_for

ROOT = Path(__file__).resolve().parent.parent
# The two backends a test marked `both_backends` runs on.
BACKENDS = ("kubesim", pytest.param("kubernetes", marks=pytest.mark.kubernetes))


class NotOnRealCluster(Exception):
    """What only kubesim's own API server can do (an injected API fault)."""


@dataclass
class RealCluster:
    plane: ControlPlane
    kubelet: subprocess.Popen[bytes]
    metrics_url: str
    control_token: str
    tls: bool = True
    backend: str = "kubernetes"
    audit_from: int = 0  # the audit log's size at the last reset
    # The kubeconfig context of an account that may read nodes and pods and write nothing.
    readonly_context: str = "readonly"

    @property
    def readonly_user(self) -> str:
        return self.plane.tokens["readonly"].user

    @property
    def url(self) -> str:
        return self.plane.url

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def audit_log(self) -> Path:
        return self.plane.audit_log

    def api_client(self, *, read_only: bool = False) -> client.ApiClient:
        context = self.readonly_context if read_only else "admin"
        return config.new_client_from_config(config_file=str(self.kubeconfig), context=context)

    def core(self, *, read_only: bool = False) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client(read_only=read_only))

    def control(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The kubelet's control endpoints (GPUs, exporter, node loss). API faults are
        kubesim's own server's: a real API server cannot be told to fail."""
        if path == "faults":
            raise NotOnRealCluster("API faults are injected by kubesim's own API server only")
        request = urllib.request.Request(
            f"{self.metrics_url}/kubesim/{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.control_token}"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())

    def reset(self) -> dict[str, Any]:
        """The scenario's state again (see `kubesim.kubelet.reset`); the audit log starts
        over, so a test counts only its own requests."""
        answer = self._reset_once_more_if_unsettled()
        self.audit_from = self.audit_log.stat().st_size if self.audit_log.exists() else 0
        return answer

    def _reset_once_more_if_unsettled(self) -> dict[str, Any]:
        """A reset that met the last test's leftovers still settling (pods terminating, a
        namespace being finalized, a node catching up) is tried once more; a second
        failure raises with the kubelet's own account of it."""
        for attempt in (1, 2):
            try:
                return self.control("reset", {})
            except urllib.error.HTTPError as error:
                reason = error.read().decode(errors="replace")
                if attempt == 2:
                    raise RuntimeError(f"resetting the real cluster failed: {reason}") from error
                time.sleep(2)
        raise AssertionError("unreachable")

    def audit_events(self) -> list[dict[str, Any]]:
        """What the portal and the test sent (the admin and read-only users, and service
        accounts outside kube-system such as the chart's), in kubesim's audit shape: the
        kubelets' heartbeats and the control plane's own requests are left out. The API
        server writes a request's event as its response goes out: read until the log
        stands still."""
        size = -1
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and self.audit_log.stat().st_size != size:
            size = self.audit_log.stat().st_size
            time.sleep(0.2)
        with self.audit_log.open("rb") as log:
            log.seek(self.audit_from)
            lines = log.read().decode().splitlines()
        events = (json.loads(line) for line in lines if line)
        return [e for e in events if self._sent_by_a_client(e.get("user", {}).get("username", ""))]

    def _sent_by_a_client(self, user: str) -> bool:
        if user in (self.plane.tokens["admin"].user, self.readonly_user):
            return True
        return user.startswith("system:serviceaccount:") and not user.startswith(
            "system:serviceaccount:kube-system:"
        )

    def add_context(self, name: str, token: str) -> None:
        """One more context in the kubeconfig, `name`, sending `token` (replaced if there)."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"] = [u for u in config["users"] if u["name"] != name]
        config["contexts"] = [c for c in config["contexts"] if c["name"] != name]
        config["users"].append({"name": name, "user": {"token": token}})
        cluster = config["clusters"][0]["name"]
        config["contexts"].append({"name": name, "context": {"cluster": cluster, "user": name}})
        tmp = self.kubeconfig.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(config, sort_keys=False))
        tmp.chmod(0o600)
        tmp.replace(self.kubeconfig)

    def count(self, verb: str, resource: str = "nodes", name: str | None = None) -> int:
        return sum(
            1
            for event in self.audit_events()
            if event["verb"] == verb
            and event.get("objectRef", {}).get("resource") == resource
            and not event.get("objectRef", {}).get("subresource")
            and (name is None or event.get("objectRef", {}).get("name") == name)
        )


def _all_nodes_ready(plane: ControlPlane, expected: int) -> bool:
    nodes = client.CoreV1Api(plane_client(plane)).list_node().items
    ready = [
        n
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        and not any(t.key == "node.kubernetes.io/not-ready" for t in n.spec.taints or [])
    ]
    return len(nodes) >= expected and len(ready) >= expected - 1  # one demo node is down


@contextlib.contextmanager
def real_cluster(
    workdir: Path, *, scenario: str = "demo", options: Options | None = None
) -> Iterator[RealCluster]:
    with running(workdir / "control-plane", options=options or Options()) as plane:
        token = secrets.token_hex(16)
        port = free_port()
        ready = workdir / "kubelet.ready"
        log = (workdir / "kubelet.log").open("wb")
        argv = [
            *(sys.executable, "-m", "kubesim", "kubelet"),
            *("--kubeconfig", str(plane.kubeconfig), "--context", "kubelet"),
            *("--scenario", scenario, "--metrics-port", str(port)),
            *("--control-token", token, "--ready-file", str(ready)),
        ]
        # Killed with the test process, as the control plane's processes are: a run stopped
        # with SIGKILL left a kubelet heartbeating to nothing for hours.
        kubelet = subprocess.Popen(
            argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )
        try:
            wait_for(
                lambda: ready.exists() or kubelet.poll() is not None, timeout=120, what="kubelet"
            )
            if kubelet.poll() is not None:
                raise RuntimeError(
                    f"kubesim kubelet exited: {(workdir / 'kubelet.log').read_text()}"
                )
            expected = len(client.CoreV1Api(plane_client(plane)).list_node().items)
            wait_for(lambda: _all_nodes_ready(plane, expected), timeout=120, what="nodes Ready")
            yield RealCluster(plane, kubelet, f"http://127.0.0.1:{port}", token)
        finally:
            stop(kubelet)
            log.close()


def plane_client(plane: ControlPlane) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(plane.kubeconfig), context="admin")
