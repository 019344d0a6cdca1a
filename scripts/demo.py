"""`make demo`: the portal on an embedded default, every part real but the cluster.

Starts Redis, Prometheus, the cluster simulator (kubesim), a Celery worker and beat, and the
web server on 127.0.0.1:8000, all from `.demo/`; Ctrl-C stops every child. A second run
reuses the database and the demo users.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".demo"
PYTHON = sys.executable
PORTS = {"web": 8000, "redis": 6390, "prometheus": 9091, "kubesim": 6443, "exporter": 9400}


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_until(check, what: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"demo: {what} exited with {process.returncode}; see {STATE / 'logs'}")
        if check():
            return
        time.sleep(0.2)
    sys.exit(f"demo: {what} did not come up within {timeout:.0f}s; see {STATE / 'logs'}")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 -- loopback only
            return response.status < 500
    except OSError:
        return False


class Children:
    def __init__(self) -> None:
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        (STATE / "logs").mkdir(parents=True, exist_ok=True)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (STATE / "logs" / f"{name}.log").open("ab")
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us only; we stop children in order
        )
        self.processes.append((name, process))
        return process

    def stop_all(self) -> None:
        for _name, process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name, process in reversed(self.processes):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"demo: {name} did not stop in time, killing it")
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def prometheus_config(path: Path, exporter_port: int) -> None:
    path.write_text(
        "global:\n  scrape_interval: 5s\n  evaluation_interval: 5s\n"
        "scrape_configs:\n"
        "  - job_name: dcgm-exporter\n"
        # As behind a ServiceMonitor: the exporter pod's own labels on the target and
        # honor_labels false, so the workload's pod label arrives as exported_pod.
        "    honor_labels: false\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter_port}']\n"
        "        labels: {namespace: gpu-operator, pod: nvidia-dcgm-exporter-demo, "
        "container: nvidia-dcgm-exporter}\n"
    )


def main() -> None:
    busy = [f"{name} ({port})" for name, port in PORTS.items() if port_in_use(port)]
    if busy:
        sys.exit(f"demo: ports already in use: {', '.join(busy)}; is another demo running?")
    for program in ("redis-server", "prometheus"):
        if shutil.which(program) is None:
            sys.exit(f"demo: {program} is missing: run 'sudo apt-get install -y {program}'")

    STATE.mkdir(exist_ok=True)
    kubeconfig = STATE / "kubeconfig"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DJANGO_DEBUG": "true",
        "DATABASE_URL": f"sqlite:///{STATE / 'portal.sqlite3'}",
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{PORTS['redis']}/0",
        "CACHE_URL": f"redis://127.0.0.1:{PORTS['redis']}/1",
        "PROMETHEUS_URL": f"http://127.0.0.1:{PORTS['prometheus']}",
        "KUBECONFIG": str(kubeconfig),
        "PYTHONUNBUFFERED": "1",
    }
    manage = [PYTHON, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "demo_users"], cwd=ROOT, env=env, check=True)

    children = Children()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        redis = children.start(
            "redis",
            [
                "redis-server",
                "--port",
                str(PORTS["redis"]),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(STATE),
            ],
            env,
        )
        wait_until(lambda: port_in_use(PORTS["redis"]), "redis-server", redis)

        kubesim_ready = None
        if (ROOT / "kubesim" / "__main__.py").exists():
            kubeconfig.unlink(missing_ok=True)
            kubesim = children.start(
                "kubesim",
                [
                    PYTHON,
                    "-m",
                    "kubesim",
                    "serve",
                    "--scenario",
                    "demo",
                    "--port",
                    str(PORTS["kubesim"]),
                    "--metrics-port",
                    str(PORTS["exporter"]),
                    "--kubeconfig",
                    str(kubeconfig),
                    "--audit-log",
                    str(STATE / "logs" / "audit.log"),
                    "--tls",  # kubectl sends its bearer token only over TLS
                ],
                env,
            )
            wait_until(kubeconfig.exists, "kubesim", kubesim)
            kubesim_ready = True
            # The beat syncs every 30 s; the first pages should not wait for it.
            subprocess.run([*manage, "sync_inventory"], cwd=ROOT, env=env, check=True)
        else:
            env["KUBECONFIG"] = ""
            print("demo: kubesim is not built yet; the portal starts without a cluster")

        prom_config = STATE / "prometheus.yml"
        prometheus_config(prom_config, PORTS["exporter"])
        prometheus = children.start(
            "prometheus",
            [
                "prometheus",
                f"--config.file={prom_config}",
                f"--storage.tsdb.path={STATE / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{PORTS['prometheus']}",
                "--log.level=warn",
            ],
            env,
        )
        wait_until(lambda: http_ok(f"{env['PROMETHEUS_URL']}/-/ready"), "prometheus", prometheus)

        children.start(
            "worker",
            [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                "2",
            ],
            env,
        )
        children.start(
            "beat",
            [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "portal",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(STATE / "celerybeat-schedule"),
            ],
            env,
        )
        web = children.start(
            "web",
            [
                PYTHON,
                "-m",
                "gunicorn",
                "portal.wsgi:application",
                "--bind",
                f"127.0.0.1:{PORTS['web']}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--access-logfile",
                "-",
            ],
            env,
        )
        wait_until(lambda: http_ok(f"http://127.0.0.1:{PORTS['web']}/healthz"), "web", web)

        print()
        print(f"  Portal      http://127.0.0.1:{PORTS['web']}/")
        print(f"  Readiness   http://127.0.0.1:{PORTS['web']}/readyz")
        print(f"  Prometheus  {env['PROMETHEUS_URL']}/")
        if kubesim_ready:
            print(f"  kubectl     KUBECONFIG={kubeconfig} kubectl get nodes")
        print(f"  Logs        {STATE / 'logs'}/")
        print("\nCtrl-C stops everything.")
        while all(process.poll() is None for _, process in children.processes):
            time.sleep(0.5)
        dead = [name for name, process in children.processes if process.poll() is not None]
        print(f"demo: {', '.join(dead)} stopped unexpectedly; see {STATE / 'logs'}")
    except KeyboardInterrupt:
        print("\ndemo: stopping")
    finally:
        children.stop_all()


if __name__ == "__main__":
    main()
