"""Start and stop a control plane on loopback: etcd, kube-apiserver (authorization
`Node,RBAC`, the default admission plugins, an audit log), kube-scheduler and
kube-controller-manager, each on a free port; an admin kubeconfig; ready when `/readyz`
answers and the `default` service account exists (pods are refused without it).

Every process is started in its own session with a parent-death signal, so a test run that
crashes takes its control plane with it; a pid file lets the next start in the same
directory stop what a killed parent could not.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from controlplane.build import ensure_built
from controlplane.certs import Pki, make_pki
from controlplane.release import Release, release

HOST = "127.0.0.1"
PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """One line: which component, and why (its log's last line and the log's path)."""


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]
    token: str = field(default_factory=lambda: secrets.token_hex(16))


def identities() -> dict[str, Identity]:
    """Who talks to the API server. One process plays every kubelet and the device
    plugins, so it is one privileged user rather than `system:node:<name>` per node."""
    return {
        "admin": Identity("portal-test-admin", ("system:masters",)),
        "readonly": Identity("portal-test-viewer", ("portal:viewers",)),
        "scheduler": Identity("system:kube-scheduler", ()),
        "controller-manager": Identity("system:kube-controller-manager", ()),
        "kubelet": Identity("kubesim-kubelet", ("system:masters",)),
    }


@dataclass(frozen=True)
class Options:
    """What a test may want of the controllers: node-loss tests shorten the grace; a bench of
    thousands of nodes lengthens it (its kubelets renew less often) and raises the
    controllers' and the scheduler's request rates (None: upstream's, 20 and 50 a second),
    with a burst of twice the rate."""

    node_monitor_grace_seconds: int = 40
    node_monitor_period_seconds: int = 5
    start_timeout: float = 120
    kube_api_qps: int | None = None


def client_rate(options: Options) -> list[str]:
    if options.kube_api_qps is None:
        return []
    return [
        f"--kube-api-qps={options.kube_api_qps}",
        f"--kube-api-burst={2 * options.kube_api_qps}",
    ]


@dataclass
class ControlPlane:
    directory: Path
    url: str
    kubeconfig: Path
    audit_log: Path
    ca: Path
    tokens: dict[str, Identity]
    processes: dict[str, subprocess.Popen[bytes]]
    release: Release

    def stop(self) -> None:
        stop_all(self.processes)
        (self.directory / "pids.json").unlink(missing_ok=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def die_with_parent() -> None:
    """In a child before exec: SIGKILL when the parent dies, whatever killed it."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _spawn(name: str, argv: list[str], directory: Path) -> subprocess.Popen[bytes]:
    log = (directory / f"{name}.log").open("ab")
    return subprocess.Popen(
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )


STOP_SECONDS = 5.0


def stop_all(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """The controllers first, etcd last: the API server writes until it stops. Nothing here
    is kept, so a component still draining its watches after STOP_SECONDS is killed."""
    for process in reversed(list(processes.values())):
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_leftovers(directory: Path) -> None:
    """Kill what an earlier start in `directory` left running (its parent was killed)."""
    pids = directory / "pids.json"
    if not pids.exists():
        return
    for pid in json.loads(pids.read_text()).values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if str(directory).encode() in cmdline:
                os.killpg(pid, signal.SIGKILL)
    pids.unlink()


AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}


def _write_tokens(path: Path, tokens: dict[str, Identity]) -> None:
    lines = [
        f'{i.token},{i.user},{i.user},"{",".join(i.groups)}"'
        if i.groups
        else f"{i.token},{i.user},{i.user}"
        for i in tokens.values()
    ]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)


def write_kubeconfig(path: Path, url: str, ca: Path, users: dict[str, Identity]) -> None:
    """One context per identity, named after it; `admin` is current."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "control-plane",
                "cluster": {"server": url, "certificate-authority": str(ca)},
            }
        ],
        "users": [{"name": name, "user": {"token": i.token}} for name, i in users.items()],
        "contexts": [
            {"name": name, "context": {"cluster": "control-plane", "user": name}} for name in users
        ],
        "current-context": "admin",
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)


def etcd_argv(binaries: Path, directory: Path, client: int, peer: int) -> list[str]:
    return [
        str(binaries / "etcd"),
        *("--name", "control-plane", "--data-dir", str(directory / "etcd")),
        *("--listen-client-urls", f"http://{HOST}:{client}"),
        *("--advertise-client-urls", f"http://{HOST}:{client}"),
        *("--listen-peer-urls", f"http://{HOST}:{peer}"),
        *("--initial-advertise-peer-urls", f"http://{HOST}:{peer}"),
        *("--initial-cluster", f"control-plane=http://{HOST}:{peer}"),
        # A test cluster lives minutes: no fsync per write (the disk is shared with the tests).
        "--unsafe-no-fsync",
        *("--log-level", "warn"),
    ]


def apiserver_argv(binaries: Path, directory: Path, pki: Pki, etcd: int, port: int) -> list[str]:
    return [
        str(binaries / "kube-apiserver"),
        f"--etcd-servers=http://{HOST}:{etcd}",
        f"--bind-address={HOST}",
        f"--advertise-address={HOST}",
        # The `kubernetes` Service's endpoints may not be a loopback address: nobody in
        # this cluster reaches the API server through the Service anyway.
        "--endpoint-reconciler-type=none",
        f"--secure-port={port}",
        f"--tls-cert-file={pki.server_crt}",
        f"--tls-private-key-file={pki.server_key}",
        f"--client-ca-file={pki.ca_crt}",
        f"--token-auth-file={directory / 'tokens.csv'}",
        "--authorization-mode=Node,RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        "--service-cluster-ip-range=10.96.0.0/24",
        "--allow-privileged=true",
        f"--audit-policy-file={directory / 'audit-policy.yaml'}",
        f"--audit-log-path={directory / 'audit.log'}",
        f"--cert-dir={directory / 'apiserver-certs'}",
        "--v=1",
    ]


def component_kubeconfig(directory: Path, url: str, pki: Pki, name: str, who: Identity) -> Path:
    path = directory / f"{name}.kubeconfig"
    write_kubeconfig(path, url, pki.ca_crt, {"admin": who})
    return path


def scheduler_argv(
    binaries: Path, kubeconfig: Path, port: int, options: Options | None = None
) -> list[str]:
    return [
        str(binaries / "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={HOST}",
        f"--secure-port={port}",
        "--leader-elect=false",
        *client_rate(options or Options()),
        "--v=1",
    ]


def controller_manager_argv(
    binaries: Path, kubeconfig: Path, pki: Pki, port: int, options: Options
) -> list[str]:
    return [
        str(binaries / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={HOST}",
        f"--secure-port={port}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_crt}",
        f"--node-monitor-grace-period={options.node_monitor_grace_seconds}s",
        f"--node-monitor-period={options.node_monitor_period_seconds}s",
        *client_rate(options),
        "--v=1",
    ]


def _request(
    url: str,
    ca: Path | None,
    token: str | None,
    body: dict[str, object] | None = None,
    timeout: float = 2,
) -> tuple[int, bytes]:
    """(status, body); status 0 when nothing answered. `ca` None: the scheduler's and the
    controller-manager's own self-signed serving certificates, only probed for health."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")  # noqa: S310 - https URLs this module builds
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if ca is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing logged)"


def _wait(what: str, ready, processes, directory: Path, deadline: float) -> None:  # type: ignore[no-untyped-def]
    while True:
        for name, process in processes.items():
            if process.poll() is not None:
                log = directory / f"{name}.log"
                raise ControlPlaneError(
                    f"{name} exited with {process.returncode}: {_last_line(log)} (log: {log})"
                )
        if ready():
            return
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"{what} not ready in time (logs in {directory})")
        time.sleep(0.2)


@dataclass(frozen=True)
class Ports:
    etcd: int
    peer: int
    apiserver: int
    scheduler: int
    controller_manager: int

    @classmethod
    def pick(cls, apiserver: int | None = None) -> Ports:
        if apiserver is not None and port_in_use(apiserver):
            raise ControlPlaneError(f"port {apiserver} on {HOST} is in use")
        return cls(free_port(), free_port(), apiserver or free_port(), free_port(), free_port())


def start(
    directory: Path,
    *,
    options: Options | None = None,
    rel: Release | None = None,
    apiserver_port: int | None = None,
) -> ControlPlane:
    """A control plane serving from `directory` (made or emptied first), ready to use."""
    options, rel = options or Options(), rel or release()
    ports = Ports.pick(apiserver_port)  # a taken port is refused before any work
    binaries = ensure_built(rel)
    directory.mkdir(parents=True, exist_ok=True)
    stop_leftovers(directory)
    pki = make_pki(directory / "pki")
    tokens = identities()
    _write_tokens(directory / "tokens.csv", tokens)
    (directory / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
    url = f"https://{HOST}:{ports.apiserver}"
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        _start_all(directory, binaries, pki, ports, url, tokens, options, processes)
    except BaseException:
        stop_all(processes)
        raise
    kubeconfig = directory / "kubeconfig"
    users = {name: tokens[name] for name in ("admin", "readonly", "kubelet")}
    write_kubeconfig(kubeconfig, url, pki.ca_crt, users)
    return ControlPlane(
        directory, url, kubeconfig, directory / "audit.log", pki.ca_crt, tokens, processes, rel
    )


def _start_all(directory, binaries, pki, ports, url, tokens, options, processes) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + options.start_timeout
    pids = directory / "pids.json"

    def spawn(name: str, argv: list[str]) -> None:
        processes[name] = _spawn(name, argv, directory)
        pids.write_text(json.dumps({n: p.pid for n, p in processes.items()}))

    spawn("etcd", etcd_argv(binaries, directory, ports.etcd, ports.peer))
    spawn("kube-apiserver", apiserver_argv(binaries, directory, pki, ports.etcd, ports.apiserver))
    admin = tokens["admin"].token
    _wait(
        "kube-apiserver",
        lambda: _request(f"{url}/readyz", pki.ca_crt, admin)[0] == 200,
        processes,
        directory,
        deadline,
    )
    scheduler = component_kubeconfig(directory, url, pki, "scheduler", tokens["scheduler"])
    manager = component_kubeconfig(
        directory, url, pki, "controller-manager", tokens["controller-manager"]
    )
    spawn("kube-scheduler", scheduler_argv(binaries, scheduler, ports.scheduler, options))
    spawn(
        "kube-controller-manager",
        controller_manager_argv(binaries, manager, pki, ports.controller_manager, options),
    )
    for name, port in (
        ("kube-scheduler", ports.scheduler),
        ("kube-controller-manager", ports.controller_manager),
    ):
        _wait(
            name,
            lambda port=port: _request(f"https://{HOST}:{port}/healthz", None, None)[0] == 200,
            processes,
            directory,
            deadline,
        )
    default_sa = f"{url}/api/v1/namespaces/default/serviceaccounts/default"
    _wait(
        "the default service account",
        lambda: _request(default_sa, pki.ca_crt, admin)[0] == 200,
        processes,
        directory,
        deadline,
    )
    grant_viewer(url, pki.ca_crt, admin, tokens["readonly"].user)


VIEWER_ROLE = "portal-test-viewer"


def grant_viewer(url: str, ca: Path, admin: str, user: str) -> None:
    """The read-only context reads everything and writes nothing (the built-in `view`
    role leaves out nodes, which the portal reads first of all)."""
    rbac = f"{url}/apis/rbac.authorization.k8s.io/v1"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": VIEWER_ROLE},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": VIEWER_ROLE},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": VIEWER_ROLE,
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    for path, body in (("clusterroles", role), ("clusterrolebindings", binding)):
        status, answer = _request(f"{rbac}/{path}", ca, admin, body)
        if status not in (201, 409):
            raise ControlPlaneError(f"creating the viewer {path}: {status} {answer[:200]!r}")


@contextlib.contextmanager
def running(directory: Path, **kwargs) -> Iterator[ControlPlane]:  # type: ignore[no-untyped-def]
    plane = start(directory, **kwargs)
    try:
        yield plane
    finally:
        plane.stop()
