"""`make demo`: the portal on an embedded default, every part real but the cluster.

Starts Redis, Prometheus, the cluster simulator (kubesim), a Celery worker and beat, and the
web server on 127.0.0.1:8000 (DEMO_PORT), all from `.demo/` (DEMO_STATE_DIR). Ctrl-C,
SIGTERM or SIGHUP, to the demo or to its whole process group — or SIGINT or SIGHUP to the
`make` that runs it — stops every child it started and frees every port. A second run
reuses the database and the demo users.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from portal.env import EnvError, env_bool, env_int, env_port, env_str  # noqa: E402 -- after the path is set

PYTHON = sys.executable
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
# The labels Prometheus's scrape of the exporter adds (prometheus_config): the backfilled
# history is the same series the live scrape continues.
EXPORTER_TARGET_LABELS = (
    "namespace=gpu-operator,pod=nvidia-dcgm-exporter-demo,container=nvidia-dcgm-exporter"
)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_TIMEOUT = 15.0


class Stop(BaseException):
    """A stop signal arrived: leave whatever is running and stop the children. A
    BaseException, like KeyboardInterrupt, so no `except Exception` on the way swallows it."""


@dataclass(frozen=True)
class DemoConfig:
    web: int
    redis: int
    prometheus: int
    kubesim: int
    exporter: int
    state: Path
    cluster: str = "kubesim"  # or "kubernetes": the real control plane, kubesim as kubelet
    # Days of jobs and DCGM samples replayed before the demo serves (the pages' longest
    # window is 30 days). Fewer start faster: a month is about 1 GB for promtool to import;
    # none starts the simulator's workload live, with no history and no import.
    history_days: int = 30
    # The demo's cluster (kubesim/scenarios/): showcase is demo's with a MIG pool and DRA
    # nodes beside it.
    scenario: str = "showcase"
    # A second cluster served by the same portal (on kubesim only): the demo scenario's
    # whole GPUs, with its own simulator and Prometheus. 0 for the port: none.
    east_kubesim: int = 0
    east_exporter: int = 0
    east_prometheus: int = 0

    @classmethod
    def from_environment(cls) -> DemoConfig:
        state = Path(env_str("DEMO_STATE_DIR", str(ROOT / ".demo")))
        return cls(
            web=env_port("DEMO_PORT", 8000),
            redis=env_port("DEMO_REDIS_PORT", 6390),
            prometheus=env_port("DEMO_PROMETHEUS_PORT", 9091),
            kubesim=env_port("DEMO_KUBESIM_PORT", 6443),
            exporter=env_port("DEMO_EXPORTER_PORT", 9400),
            state=state.resolve(),
            cluster=demo_cluster(),
            history_days=env_int("DEMO_HISTORY_DAYS", 30, minimum=0, maximum=30),
            scenario=demo_scenario(),
            **east_ports(),
        )

    @property
    def ports(self) -> dict[str, int]:
        ports = {
            "web": self.web,
            "redis": self.redis,
            "prometheus": self.prometheus,
            "kubesim": self.kubesim,
            "exporter": self.exporter,
        }
        if self.east:
            ports |= {
                "east kubesim": self.east_kubesim,
                "east exporter": self.east_exporter,
                "east prometheus": self.east_prometheus,
            }
        return ports

    @property
    def east(self) -> bool:
        """Whether the demo serves a second cluster."""
        return bool(self.east_kubesim) and self.cluster == "kubesim"

    @property
    def east_state(self) -> Path:
        return self.state / EAST

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def history(self) -> Path:
        return self.state / "history"

    @property
    def prometheus_data(self) -> Path:
        return self.state / "prometheus-data"


CLUSTERS = ("kubesim", "kubernetes")
# The names of the demo's two clusters, as its CLUSTERS_FILE gives them.
HOME, EAST = "default", "east"


def east_ports() -> dict[str, int]:
    """The second cluster's ports; DEMO_EAST=0 serves one cluster."""
    if not env_bool("DEMO_EAST", True):
        return {}
    return {
        "east_kubesim": env_port("DEMO_EAST_KUBESIM_PORT", 6445),
        "east_exporter": env_port("DEMO_EAST_EXPORTER_PORT", 9402),
        "east_prometheus": env_port("DEMO_EAST_PROMETHEUS_PORT", 9093),
    }


SCENARIOS = ROOT / "kubesim" / "scenarios"


def demo_cluster() -> str:
    value = env_str("DEMO_CLUSTER", "kubesim")
    if value not in CLUSTERS:
        raise EnvError(f"DEMO_CLUSTER: expected one of {', '.join(CLUSTERS)}, got {value!r}")
    return value


def demo_scenario() -> str:
    value = env_str("DEMO_SCENARIO", "showcase")
    if not (SCENARIOS / f"{value}.yaml").is_file():
        known = ", ".join(sorted(p.stem for p in SCENARIOS.glob("*.yaml")))
        raise EnvError(f"DEMO_SCENARIO: expected one of {known}, got {value!r}")
    return value


def say(message: str) -> None:
    # The terminal may be gone (make killed, the pipe closed): never let that stop a cleanup.
    with contextlib.suppress(OSError):
        print(message, flush=True)


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def http_ok(url: str, timeout: float = 1) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 -- loopback only
            return response.status < 500
    except OSError:
        return False


class Children:
    """The processes the demo started, each the leader of its own process group: a Ctrl-C
    reaches the demo only, and the demo stops them in order, with everything they forked."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        logs.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append((name, process))
        return process

    def wait_until(self, check: Callable[[], bool], what: str, timeout: float = 60) -> None:
        _name, process = self.processes[-1]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SystemExit(f"demo: {what} exited with {process.returncode}; see {self.logs}")
            if check():
                return
            time.sleep(0.2)
        raise SystemExit(f"demo: {what} did not come up within {timeout:.0f}s; see {self.logs}")

    def first_dead(self) -> str | None:
        return next((name for name, p in self.processes if p.poll() is not None), None)

    def stop_all(self) -> None:
        """SIGTERM to every child's group, newest first; SIGKILL to what is left at the
        deadline, and to the groups of leaders that exited before their workers did."""
        for _name, process in reversed(self.processes):
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for name, process in reversed(self.processes):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"demo: {name} did not stop within {STOP_TIMEOUT:.0f}s, killing it")
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def ignore_stop_signals() -> None:
    for each in STOP_SIGNALS:
        signal.signal(each, signal.SIG_IGN)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn the first stop signal into Stop; ignore the rest while the children stop (a
    second Ctrl-C or a group-wide SIGTERM must not cut the cleanup short)."""

    def request_stop(signum: int, _frame: object) -> None:
        ignore_stop_signals()
        raise Stop(signal.Signals(signum).name)

    previous = {each: signal.signal(each, request_stop) for each in STOP_SIGNALS}
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)


class MakeWatch:
    """`make demo` run by a supervisor, or stopped by a terminal's job control, gets SIGINT
    (or SIGHUP) on make's own process, not on its group. GNU make forwards only SIGTERM to
    its recipe: for the others it resets the signal to its default and waits for the demo,
    which never hears of it, forever. So while make is the parent, the demo watches it —
    the signals make catches (/proc/<make>/status, SigCgt) and whether it is still there —
    and stops as if the signal had come to the demo itself."""

    WATCHED = (signal.SIGINT, signal.SIGHUP)

    def __init__(self) -> None:
        self.parent = os.getppid()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="make-watch")

    @staticmethod
    def caught(pid: int) -> int | None:
        """The mask of the signals `pid` catches; None once it is gone."""
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        line = next((x for x in status.splitlines() if x.startswith("SigCgt:")), "")
        return int(line.split()[1], 16) if line else None

    def start(self) -> None:
        try:
            name = Path(f"/proc/{self.parent}/comm").read_text().strip()
        except OSError:
            return  # no /proc: nothing to watch with
        if name in ("make", "gmake"):
            self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _run(self) -> None:
        before = self.caught(self.parent) or 0
        while not self.stopping.wait(0.2):
            now = self.caught(self.parent)
            if os.getppid() != self.parent or now is None:
                self._stop_with(signal.SIGHUP)  # make is gone: nothing will stop the demo
                return
            for each in self.WATCHED:
                bit = 1 << (each - 1)
                if before & bit and not now & bit:  # make is handling it: pass it on
                    self._stop_with(each)
                    return

    def _stop_with(self, signum: signal.Signals) -> None:
        if not self.stopping.is_set():
            os.kill(os.getpid(), signum)  # the main thread's handler stops the children


def metrics_token_file(config: DemoConfig) -> Path:
    """A token of this demo run for Prometheus to scrape the portal's /metrics/pools (each
    node's pool, which the pool rules add figures up over), readable by its owner only."""
    path = config.state / "metrics-token"
    config.state.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(secrets.token_urlsafe(24))
    return path


def demo_environment(config: DemoConfig) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if k != "METRICS_TOKEN"}
    return {
        **inherited,
        "METRICS_TOKEN_FILE": str(metrics_token_file(config)),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DJANGO_DEBUG": "true",
        "DATABASE_URL": f"sqlite:///{config.state / 'portal.sqlite3'}",
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{config.redis}/0",
        "CACHE_URL": f"redis://127.0.0.1:{config.redis}/1",
        "PROMETHEUS_URL": f"http://127.0.0.1:{config.prometheus}",
        "KUBECONFIG": str(config.kubeconfig),
        # The sharing configurations the simulator's device plugin knows, by name.
        "DEVICE_PLUGIN_CONFIGS": os.environ.get(
            "DEVICE_PLUGIN_CONFIGS",
            "default=whole,time-sliced-4=time-slicing:4,mps-4=mps:4",
        ),
        "PYTHONUNBUFFERED": "1",
    }


def fleet_environment(config: DemoConfig, env: dict[str, str]) -> dict[str, str]:
    """The portal's processes' environment when it serves the second cluster too: both
    clusters described by a CLUSTERS_FILE (the variables then describe neither)."""
    if not config.east:
        return env
    path = config.state / "clusters.yaml"
    path.write_text(
        "clusters:\n"
        f"  - name: {HOME}\n"
        f"    kubeconfig: {config.kubeconfig}\n"
        f"    prometheus: {{url: 'http://127.0.0.1:{config.prometheus}'}}\n"
        f"  - name: {EAST}\n"
        "    colour: '#2ca02c'\n"
        f"    kubeconfig: {config.east_state / 'kubeconfig'}\n"
        f"    prometheus: {{url: 'http://127.0.0.1:{config.east_prometheus}'}}\n"
    )
    return {**env, "KUBECONFIG": "", "PROMETHEUS_URL": "", "CLUSTERS_FILE": str(path)}


def start_east(children: Children, config: DemoConfig, env: dict[str, str]) -> None:
    """The second cluster: the demo scenario's whole GPUs on a simulator of their own,
    live (no history), and a Prometheus scraping its exporter with the same rules."""
    state = config.east_state
    state.mkdir(parents=True, exist_ok=True)
    kubeconfig = state / "kubeconfig"
    kubeconfig.unlink(missing_ok=True)
    argv = [PYTHON, "-m", "kubesim", "serve", "--scenario", "demo"]
    argv += ["--port", str(config.east_kubesim), "--metrics-port", str(config.east_exporter)]
    argv += ["--kubeconfig", str(kubeconfig), "--audit-log", str(config.logs / "east-audit.log")]
    argv += ["--tls", "--workload", "demo", "--history-days", "0", "--retention-days", "1"]
    children.start("east-kubesim", argv, env)
    prom_config = state / "prometheus.yml"
    prometheus_config(prom_config, config.east_exporter, config, EAST)
    data = state / "prometheus-data"
    shutil.rmtree(data, ignore_errors=True)
    argv = ["prometheus", f"--config.file={prom_config}", f"--storage.tsdb.path={data}"]
    argv += [f"--web.listen-address=127.0.0.1:{config.east_prometheus}", "--log.level=warn"]
    children.start("east-prometheus", argv, env)
    children.wait_until(kubeconfig.exists, "the east cluster's kubesim", timeout=180)
    url = f"http://127.0.0.1:{config.east_prometheus}/-/ready"
    children.wait_until(lambda: http_ok(url), "the east cluster's prometheus")


def prometheus_config(path: Path, exporter_port: int, config: DemoConfig, cluster: str) -> None:
    path.write_text(
        "global:\n  scrape_interval: 5s\n  evaluation_interval: 5s\n"
        # The portal's recording rules: the pages read the per-node figures they record.
        f"rule_files: ['{RULES}']\n"
        "scrape_configs:\n"
        "  - job_name: dcgm-exporter\n"
        # As behind a ServiceMonitor: the exporter pod's own labels on the target and
        # honor_labels false, so the workload's pod label arrives as exported_pod.
        "    honor_labels: false\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter_port}']\n"
        "        labels: {" + EXPORTER_TARGET_LABELS.replace("=", ": ").replace(",", ", ") + "}\n"
        # Each node's pool in this cluster, which the pool rules add its figures up over.
        "  - job_name: portal-pools\n"
        "    metrics_path: /metrics/pools\n"
        f"    params: {{cluster: ['{cluster}']}}\n"
        f"    authorization: {{credentials_file: '{config.state / 'metrics-token'}'}}\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{config.web}']}}]\n"
    )


def check_prerequisites(config: DemoConfig) -> None:
    busy = [f"{name} ({port})" for name, port in config.ports.items() if port_in_use(port)]
    if busy:
        sys.exit(
            f"demo: ports already in use: {', '.join(busy)}; is another demo running? "
            "(DEMO_PORT, DEMO_REDIS_PORT, ... choose others)"
        )
    for program in ("redis-server", "prometheus"):
        if shutil.which(program) is None:
            sys.exit(f"demo: {program} is missing: run 'sudo apt-get install -y {program}'")


def start_redis(children: Children, config: DemoConfig, env: dict[str, str]) -> None:
    argv = ["redis-server", "--port", str(config.redis), "--bind", "127.0.0.1"]
    argv += ["--save", "", "--appendonly", "no", "--dir", str(config.state)]
    children.start("redis", argv, env)
    children.wait_until(lambda: port_in_use(config.redis), "redis-server")


def start_kubesim(children: Children, config: DemoConfig, env: dict[str, str]) -> None:
    config.kubeconfig.unlink(missing_ok=True)
    argv = [PYTHON, "-m", "kubesim", "serve", "--scenario", config.scenario]
    argv += ["--port", str(config.kubesim), "--metrics-port", str(config.exporter)]
    argv += ["--kubeconfig", str(config.kubeconfig)]
    argv += ["--audit-log", str(config.logs / "audit.log")]
    argv += ["--tls"]  # kubectl sends its bearer token only over TLS
    # DEMO_HISTORY_DAYS (thirty) days of jobs already run (pods kept as objects), and their
    # DCGM samples written for Prometheus in the background (imported by Backfill once
    # Prometheus is up).
    argv += ["--workload", "demo", "--history-days", str(config.history_days)]
    argv += ["--retention-days", str(config.history_days + 1)]
    if config.history_days:
        argv += ["--history-openmetrics", str(config.history)]
        labels = f"job=dcgm-exporter,instance=127.0.0.1:{config.exporter},{EXPORTER_TARGET_LABELS}"
        argv += ["--history-labels", labels]
    children.start("kubesim", argv, env)
    children.wait_until(config.kubeconfig.exists, "kubesim", timeout=180)


def start_control_plane(children: Children, config: DemoConfig, env: dict[str, str]) -> None:
    """The real kube-apiserver, etcd, scheduler and controller-manager (built once into the
    cache: the first start compiles them for several minutes), and kubesim as the kubelets
    of the demo's nodes. No thirty-day history here: that is the simulator's replay."""
    plane = config.state / "control-plane"
    kubeconfig = plane / "kubeconfig"
    kubeconfig.unlink(missing_ok=True)
    subprocess.run([PYTHON, "-m", "controlplane", "build"], cwd=ROOT, env=env, check=True)
    argv = [PYTHON, "-m", "controlplane", "up", "--dir", str(plane), "--port", str(config.kubesim)]
    children.start("control-plane", argv, env)
    children.wait_until(kubeconfig.exists, "the control plane", timeout=180)
    ready = config.state / "kubelet.ready"
    ready.unlink(missing_ok=True)
    argv = [PYTHON, "-m", "kubesim", "kubelet", "--kubeconfig", str(kubeconfig)]
    argv += ["--context", "kubelet", "--scenario", config.scenario]
    argv += ["--metrics-port", str(config.exporter), "--ready-file", str(ready)]
    children.start("kubelet", argv, env)
    children.wait_until(ready.exists, "kubesim's kubelets", timeout=180)
    shutil.copyfile(kubeconfig, config.kubeconfig)
    config.kubeconfig.chmod(0o600)


def start_prometheus(children: Children, config: DemoConfig, env: dict[str, str]) -> None:
    prom_config = config.state / "prometheus.yml"
    prometheus_config(prom_config, config.exporter, config, HOME)
    # kubesim's history is new at every start: so are the samples that go with it.
    shutil.rmtree(config.prometheus_data, ignore_errors=True)
    argv = ["prometheus", f"--config.file={prom_config}"]
    argv += [f"--storage.tsdb.path={config.prometheus_data}"]
    argv += [f"--storage.tsdb.retention.time={config.history_days + 15}d"]
    argv += [f"--web.listen-address=127.0.0.1:{config.prometheus}", "--log.level=warn"]
    children.start("prometheus", argv, env)
    children.wait_until(lambda: http_ok(f"{env['PROMETHEUS_URL']}/-/ready"), "prometheus")


def start_portal(children: Children, config: DemoConfig, env: dict[str, str]) -> None:
    celery = [PYTHON, "-m", "celery", "-A", "portal"]
    children.start("worker", [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2"], env)
    beat_schedule = str(config.state / "celerybeat-schedule")
    children.start(
        "beat", [*celery, "beat", "--loglevel", "INFO", "--schedule", beat_schedule], env
    )
    # Keeps the inventory current within seconds: a kubectl label shows on the next page.
    children.start("watcher", [PYTHON, "manage.py", "watch_inventory"], env)
    if config.east:  # one watcher a cluster
        watch = [PYTHON, "manage.py", "watch_inventory", "--cluster", EAST]
        children.start("east-watcher", watch, env)
    argv = [PYTHON, "-m", "gunicorn", "portal.wsgi:application"]
    argv += ["--bind", f"127.0.0.1:{config.web}", "--workers", "2", "--threads", "4"]
    # One demo's control socket must not collide with another's (or with a test's).
    argv += ["--access-logfile", "-", "--no-control-socket"]
    children.start("web", argv, env)
    # One poll at a time, each waiting for a worker to boot: polls abandoned after a second
    # would pile up in gunicorn's backlog on a slow machine.
    children.wait_until(lambda: http_ok(f"http://127.0.0.1:{config.web}/healthz", 10), "web")


class Backfill:
    """Imports kubesim's history into Prometheus once kubesim has written it: one `promtool
    tsdb create-blocks-from openmetrics` a metric file, side by side, then the blocks moved
    into Prometheus's data directory (it loads them at its next block reload, within a
    minute). The demo is usable meanwhile; the history's charts fill in when it is done."""

    def __init__(self, config: DemoConfig) -> None:
        self.config = config
        self.processes: list[subprocess.Popen[bytes]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        if shutil.which("promtool") is None:
            say("demo: promtool is missing (Debian's prometheus package has it): no history")
            return
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()

    def _run(self) -> None:
        began = time.monotonic()
        history = self.config.history
        done = history / "complete"
        while not done.exists():
            if self.stopping.wait(1.0) or time.monotonic() - began > 600:
                return
        blocks = history / "blocks"
        shutil.rmtree(blocks, ignore_errors=True)
        with (self.config.logs / "promtool.log").open("ab") as log:
            for source in sorted(history.glob("*.om")):
                argv = ["promtool", "tsdb", "create-blocks-from", "openmetrics"]
                argv += ["--max-block-duration=1000h", str(source), str(blocks)]
                self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
            failed = [p.args for p in self.processes if p.wait() != 0]
        if self.stopping.is_set():
            return
        if failed:
            say(f"demo: importing the history failed; see {self.config.logs}/promtool.log")
            return
        self._move(blocks)
        for source in history.glob("*.om"):
            source.unlink()
        say(
            f"demo: {self.config.history_days} days of DCGM history imported into Prometheus "
            f"({time.monotonic() - began:.0f} s after the portal started)"
        )

    def _move(self, blocks: Path) -> None:
        for block in blocks.iterdir():
            shutil.move(str(block), self.config.prometheus_data / block.name)


def start_everything(
    children: Children, config: DemoConfig, env: dict[str, str], setup: subprocess.Popen[bytes]
) -> None:
    """The servers, then (once `setup` has made the database) the inventory's first sync
    and the portal's processes."""
    start_redis(children, config, env)
    if config.cluster == "kubernetes":
        start_control_plane(children, config, env)
    elif (ROOT / "kubesim" / "__main__.py").exists():
        start_kubesim(children, config, env)
    else:
        env["KUBECONFIG"] = ""
        say("demo: kubesim is not built yet; the portal starts without a cluster")
    start_prometheus(children, config, env)
    if config.east:
        start_east(children, config, env)
    if setup.wait() != 0:
        raise subprocess.CalledProcessError(setup.returncode, setup.args)
    fleet = fleet_environment(config, env)
    if config.east:
        # The east cluster starts with the pools the first one has.
        copy = [PYTHON, "manage.py", "copy_pools", HOME, EAST]
        subprocess.run(copy, cwd=ROOT, env=fleet, check=True)
    if env["KUBECONFIG"]:
        # The watcher lists the cluster too once it starts; the first pages should not wait.
        subprocess.run([PYTHON, "manage.py", "sync_inventory"], cwd=ROOT, env=fleet, check=True)
    start_portal(children, config, fleet)


def print_welcome(config: DemoConfig, env: dict[str, str]) -> None:
    say("")
    say(f"  Portal      http://127.0.0.1:{config.web}/")
    say(f"  Readiness   http://127.0.0.1:{config.web}/readyz")
    say(f"  Prometheus  {env['PROMETHEUS_URL']}/")
    if env["KUBECONFIG"]:
        say(f"  kubectl     KUBECONFIG={config.kubeconfig} kubectl get nodes")
    if config.east:
        say(f"  Fleet       http://127.0.0.1:{config.web}/fleet/ (clusters {HOME} and {EAST})")
        say(f"  kubectl     KUBECONFIG={config.east_state / 'kubeconfig'} kubectl get nodes")
    say(f"  Logs        {config.logs}/")
    say("\nCtrl-C stops everything.")


def run(config: DemoConfig) -> None:
    check_prerequisites(config)
    config.state.mkdir(parents=True, exist_ok=True)
    env = demo_environment(config)
    children = Children(config.logs)
    backfill = Backfill(config)
    make = MakeWatch()
    setup: subprocess.Popen[bytes] | None = None
    with stop_on_signals():
        make.start()
        try:
            # The database is set up while the servers start: none of them reads it.
            setup = subprocess.Popen([PYTHON, "manage.py", "demo_setup"], cwd=ROOT, env=env)
            start_everything(children, config, env, setup)
            if config.cluster == "kubesim" and config.history_days:  # the simulator's replay
                backfill.start()
            print_welcome(config, env)
            while (dead := children.first_dead()) is None:
                time.sleep(0.5)
            say(f"demo: {dead} stopped unexpectedly; see {config.logs}")
        except Stop as stop:
            say(f"\ndemo: {stop} received, stopping every child")
        finally:
            ignore_stop_signals()  # nothing may interrupt the stopping itself
            if setup is not None and setup.poll() is None:  # stopped while it migrates
                setup.kill()
                setup.wait()
            make.stop()
            backfill.stop()
            children.stop_all()


def main() -> None:
    try:
        config = DemoConfig.from_environment()
    except EnvError as exc:
        sys.exit(f"demo: configuration error: {exc}")
    run(config)


if __name__ == "__main__":
    main()
