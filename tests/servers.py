"""Real servers for the tests: each started on a free loopback port, stopped afterwards."""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate, *, timeout: float, what: str):  # type: ignore[no-untyped-def]
    """The predicate's first truthy answer, asked until `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")


def http_ok(url: str, timeout: float = 1) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError):
        return False


def port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False


def require_program(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (make test installs it with apt when run as root)")
    return path


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextlib.contextmanager
def redis_server(workdir: Path, port: int | None = None) -> Iterator[RedisServer]:
    binary = require_program("redis-server")
    port = port or free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: port_open(port), timeout=10, what=f"redis-server on port {port}")
        yield RedisServer(port, process)
    finally:
        stop(process)


@dataclass
class PrometheusServer:
    port: int
    process: subprocess.Popen[bytes]
    query_log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query_count(self) -> int:
        """Queries Prometheus itself logged (its query log), the honest count of PromQL sent."""
        if not self.query_log.exists():
            return 0
        # The recording rules' evaluations are logged too (with their ruleGroup): not sent.
        return sum(
            1
            for line in self.query_log.read_text().splitlines()
            if line.strip() and '"ruleGroup"' not in line
        )

    def queries_sent(self) -> list[str]:
        """The PromQL sent to this Prometheus so far, in order (its query log)."""
        if not self.query_log.exists():
            return []
        lines = self.query_log.read_text().splitlines()
        return [
            json.loads(line)["params"]["query"]
            for line in lines
            if line.strip() and '"ruleGroup"' not in line
        ]

    def ranges_sent(self) -> list[tuple[str, float, float, float]]:
        """Each range query sent so far, in order, with its start, end and step in seconds."""
        if not self.query_log.exists():
            return []
        found = []
        for line in self.query_log.read_text().splitlines():
            if not line.strip() or '"ruleGroup"' in line:
                continue
            params = json.loads(line)["params"]
            if params.get("step"):
                start, end = (
                    datetime.fromisoformat(params[k].replace("Z", "+00:00")).timestamp()
                    for k in ("start", "end")
                )
                found.append((params["query"], start, end, float(params["step"])))
        return found

    def settled_count(self, *, quiet: float = 0.5, timeout: float = 30) -> int:
        """The query count once the log has not moved for `quiet` seconds (at most `timeout`):
        the log is appended as each query ends, and on a loaded machine a query sent by the
        last page (or a refresh after it) may end a while after its answer."""
        deadline = time.monotonic() + timeout
        count = self.query_count()
        steady_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = self.query_count()
            if now != count:
                count, steady_since = now, time.monotonic()
            elif time.monotonic() - steady_since >= quiet:
                break
        return count

    def queries_since(self, before: int) -> int:
        """Queries logged since the count was `before`, read once the log stops moving."""
        return self.settled_count() - before


# The project's recording rules (the portal reads their series when they exist).
RULES = Path(__file__).resolve().parent.parent / "deploy/prometheus/rules.yml"


def duration_seconds(duration: str) -> float:
    """A Prometheus duration as this module writes them: 1s, 15s, 1m."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    number = duration.rstrip("smh")
    return float(number) * units[duration[len(number) :]]


def rules_evaluated(url: str) -> bool:
    """Whether the recording rules have run once (their marker series exists)."""
    query = urllib.parse.urlencode({"query": "gpu_pool_portal:rules_loaded"})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=1) as response:
            return bool(json.loads(response.read())["data"]["result"])
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return False


@contextlib.contextmanager
def prometheus_server(
    workdir: Path,
    *,
    scrape_targets: list[str] | None = None,
    scrape_interval: str = "1s",
    file_sd: Path | None = None,
    rules: bool = True,
    scrape_timeout: str | None = None,
    web_config: Path | None = None,
    external_labels: dict[str, str] | None = None,
    federate: list[str] | None = None,
    metrics_path: str = "/metrics",
    extra_targets: dict[str, str] | None = None,
    rules_file: Path | None = None,
) -> Iterator[PrometheusServer]:
    """A Prometheus with the project's recording rules loaded (rules=False: without, as
    a Prometheus nobody configured for the portal), ready once they have run. With
    `web_config` (TLS, client certificates, basic auth) it is ready once it listens: its
    readiness endpoint wants what that file asks for. `external_labels` are the ones a
    Prometheus attaches to what it federates or remote-writes; with `federate` (other
    Prometheus servers' host:port) it holds their every series, recorded ones included, as
    a querier over several clusters does. `metrics_path` is the targets' page (kubesim's
    /metrics/recorded: the recorded series alone, kept with honor_labels as federated).
    `extra_targets` are more jobs (name -> host:port, scraped at /metrics); `rules_file`
    stands for the project's rules (still loaded when `rules`)."""
    binary = require_program("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    query_log = workdir / "queries.log"
    jobs = ""
    if scrape_targets:
        targets = ", ".join(f"'{target}'" for target in scrape_targets)
        # As behind a prometheus-operator ServiceMonitor: the target carries the exporter
        # pod's own pod/namespace/container labels and honor_labels is false, so the
        # workload labels the exporter reports arrive as exported_pod/_namespace/_container.
        jobs = (
            "scrape_configs:\n"
            "  - job_name: dcgm-exporter\n"
            f"    honor_labels: {'false' if metrics_path == '/metrics' else 'true'}\n"
            f"    metrics_path: {metrics_path}\n"
            "    static_configs:\n"
            f"      - targets: [{targets}]\n"
            "        labels: {namespace: gpu-operator, pod: nvidia-dcgm-exporter-sim, "
            "container: nvidia-dcgm-exporter}\n"
        )
    if file_sd is not None:
        # Per-node targets from a file, as a DaemonSet's exporters are discovered; the
        # targets carry the exporter pod's labels, so workload labels become exported_*.
        jobs += (
            ("" if jobs else "scrape_configs:\n") + "  - job_name: dcgm-exporter-per-node\n"
            "    honor_labels: false\n"
            f"    file_sd_configs: [{{files: ['{file_sd}'], refresh_interval: 1s}}]\n"
        )
    if federate:
        sources = ", ".join(f"'{source}'" for source in federate)
        jobs += (
            ("" if jobs else "scrape_configs:\n") + "  - job_name: federate\n"
            "    honor_labels: true\n"
            "    metrics_path: /federate\n"
            "    params: {'match[]': ['{__name__=~\".+\"}']}\n"
            f"    static_configs: [{{targets: [{sources}]}}]\n"
        )
    for job, target in (extra_targets or {}).items():
        jobs += (
            "" if jobs else "scrape_configs:\n"
        ) + f"  - job_name: {job}\n    static_configs: [{{targets: ['{target}']}}]\n"
    labels = ", ".join(f"{k}: {v}" for k, v in (external_labels or {}).items())
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n"
        + (f"  external_labels: {{{labels}}}\n" if labels else "")
        + f"  scrape_interval: {scrape_interval}\n"
        f"  evaluation_interval: {scrape_interval}\n"
        + (f"  scrape_timeout: {scrape_timeout}\n" if scrape_timeout else "")
        + f"  query_log_file: {query_log}\n"
        + (f"rule_files: ['{rules_file or RULES}']\n" if rules else "")
        + jobs
    )
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
            *([f"--web.config.file={web_config}"] if web_config else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if web_config is not None:
            wait_for(lambda: port_open(port), timeout=30, what=f"prometheus (TLS) on {port}")
        else:
            wait_for(
                lambda: http_ok(f"http://127.0.0.1:{port}/-/ready"),
                timeout=30,
                what=f"prometheus on port {port}",
            )
        if rules:
            # The rules first run within one evaluation interval of the start.
            url = f"http://127.0.0.1:{port}"
            wait = 30 + duration_seconds(scrape_interval)
            wait_for(lambda: rules_evaluated(url), timeout=wait, what="the recording rules")
        yield PrometheusServer(port, process, query_log)
    finally:
        stop(process)


# The recorded sum counts MIG instances' engine activity too; a tolerance, as the two sums
# add the same floats in another order.
CAUGHT_UP = (
    "abs(sum(Hostname:DCGM_FI_DEV_GPU_UTIL:sum) - sum(DCGM_FI_DEV_GPU_UTIL or 100 * "
    'DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID!=""})) < bool 0.001'
)


def rules_caught_up(prom: PrometheusServer) -> bool:
    """Whether GPUs were scraped and the recording rules have run since (the recorded
    per-node sums add up to the raw series'): the portal reads the recorded series, one
    evaluation interval behind the scrape."""
    query = urllib.parse.urlencode({"query": CAUGHT_UP})
    try:
        with urllib.request.urlopen(f"{prom.url}/api/v1/query?{query}", timeout=2) as response:
            result = json.loads(response.read())["data"]["result"]
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return False
    return bool(result) and result[0]["value"][1] == "1"


def wait_rules_caught_up(prom: PrometheusServer) -> None:
    wait_for(lambda: rules_caught_up(prom), timeout=30, what="the recording rules to catch up")


@dataclass
class HungServer:
    """Accepts connections and never answers: a hung Prometheus (or anything on HTTP)."""

    port: int
    accepted: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def hung_server() -> Iterator[HungServer]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    listener.settimeout(0.05)
    server = HungServer(int(listener.getsockname()[1]))
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(connection)  # kept open, never read or answered
            server.accepted += 1

    thread = threading.Thread(target=accept, daemon=True, name="hung-server")
    thread.start()
    try:
        yield server
    finally:
        done.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


class StaticPage(http.server.ThreadingHTTPServer):
    """Serves `body` at any path: what the portal's /metrics/pools last answered, handed to
    a Prometheus when the caller says, so that nothing waits on a scrape's timing."""

    def __init__(self) -> None:
        self.body = b""
        super().__init__(("127.0.0.1", 0), _StaticHandler)


class _StaticHandler(http.server.BaseHTTPRequestHandler):
    server: StaticPage

    def do_GET(self) -> None:
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass  # a scrape a second would fill the test's output


@contextlib.contextmanager
def static_page() -> Iterator[StaticPage]:
    server = StaticPage()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
