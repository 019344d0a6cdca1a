"""GET /api/v1/nodes/ at 5,000 nodes under 50 concurrent token clients.

    .venv/bin/python -m bench.api_nodes [--nodes 5000] [--clients 50] [--runs 3] [--profile 200]
        [--fed]

The portal runs under gunicorn (production settings, SQLite, Redis, a real Prometheus
scraping kubesim); wrk keeps 50 connections, each request with one of 50 tokens. Besides
wrk's latencies it prints the gunicorn workers' CPU time per request (their user + system
time over the run, from /proc, divided by the requests served): on a shared machine the
wall time is mostly waiting for a core, the CPU time is what a request costs. Each run
falls between two scrapes of the simulator, whose exporter renders every simulated GPU's
series in Python (on a real cluster, each node's dcgm-exporter's work). `--profile N`
also runs N requests one after another in this process, through the same settings,
database and cache, and prints their CPU time and where it goes (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import django_env
from bench.common import Http, between_prometheus_work, load
from bench.dashboard import scalar
from pools.metrics.queries import PER_GPU_METRICS
from tests.kubesim_process import kubesim_server
from tests.servers import free_port, http_ok, prometheus_server, redis_server, wait_for

ROOT = Path(__file__).resolve().parent.parent
SCRAPE_SECONDS = 60


WRK_SCRIPT = """
tokens = {%s}
counter = 0
request = function()
  counter = counter + 1
  local token = tokens[(counter %% #tokens) + 1]
  return wrk.format("GET", "/api/v1/nodes/", {["Authorization"] = "Bearer " .. token})
end
"""


def milliseconds(text: str) -> float:
    number, unit = re.fullmatch(r"([0-9.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def process_cpu_seconds(pids: list[int]) -> float:
    """User + system time of these processes so far (their threads included)."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> tuple[float, float]:
    """The machine's busy and stolen CPU seconds so far (all cores, from /proc/stat): what
    the run left idle, and what the hypervisor gave to other guests."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    ticks = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / ticks, steal / ticks


def worker_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children]


def profile_requests(token: str, count: int) -> None:
    """`count` requests one after another in this process: their CPU time each, and the
    functions it goes to."""
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/v1/nodes/").status_code == 200
    profiler = cProfile.Profile(time.process_time)  # CPU, not the wait for a core or Redis
    started = time.process_time()
    profiler.enable()
    for _ in range(count):
        client.get("/api/v1/nodes/")
    profiler.disable()
    cpu = time.process_time() - started
    plain = time.process_time()
    for _ in range(count):
        client.get("/api/v1/nodes/")
    plain = time.process_time() - plain
    print(
        f"CPU time a request, {count} in a row in one process: {plain / count * 1000:.2f} ms "
        f"({cpu / count * 1000:.2f} ms under cProfile)",
        flush=True,
    )
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
    print(out.getvalue(), flush=True)


def wrk(base: str, tokens: list[str], args: argparse.Namespace) -> subprocess.CompletedProcess[str]:
    """One wrk run: `args.clients` connections for `args.seconds`, a token a request in turn."""
    script = Path(tempfile.mkdtemp()) / "tokens.lua"
    script.write_text(WRK_SCRIPT % ", ".join(f'"{t}"' for t in tokens))
    command = ["wrk", "-t", "2", "-c", str(args.clients), "-d", f"{args.seconds}s"]
    return subprocess.run(
        [*command, "--latency", "-s", str(script), base],
        capture_output=True,
        text=True,
        check=True,
    )


def fresh_figures(client: Http, args: argparse.Namespace) -> None:
    """The steady state: figures made just before the run starts, as a portal asked all
    along has them. Waiting for the scrape can outlast their life: the first request then
    gets the last figures (METRICS_STALE_SECONDS) and starts their refresh, and the run
    would measure a quiet portal's first minute instead."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status, body = client.request("GET", "/api/v1/nodes/?page_size=1")
        assert status == 200, status
        made = json.loads(body)["metrics_as_of"]
        age = time.time() - datetime.fromisoformat(made).timestamp() if made else None
        if age is not None and age < 0.5 * args.cache_seconds:
            return
        time.sleep(0.5)
    raise RuntimeError("the node figures were not refreshed within 180 s")


def run_wrk(
    base: str, tokens: list[str], args: argparse.Namespace, workers: list[int], prometheus: str
) -> tuple[float, int]:
    """50 connections, each request with one of 50 tokens in turn (50 token clients); the
    run's p99 in milliseconds and its errors. Each run starts after the simulator's
    exporter has been scraped and ends before the next scrape (common.between_prometheus_work)."""
    # Room for the run and for the figures' refresh before it.
    between_prometheus_work(prometheus, SCRAPE_SECONDS, args.seconds + 17)
    fresh_figures(Http(base, tokens[0]), args)
    cpu_before = process_cpu_seconds(workers)
    busy_before, steal_before = machine_cpu_seconds()
    result = wrk(base, tokens, args)
    cpu = process_cpu_seconds(workers) - cpu_before
    busy, steal = (
        after - before
        for after, before in zip(machine_cpu_seconds(), (busy_before, steal_before), strict=True)
    )
    out = result.stdout
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    rate = re.search(r"Requests/sec:\s+(\S+)", out)
    total = re.search(r"(\d+) requests in", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket = re.search(r"Socket errors: (.*)", out)
    print(
        f"GET /api/v1/nodes/ (100 nodes a page, with metrics) at {args.nodes} nodes, "
        f"{args.clients} token clients (wrk, {args.seconds} s), gunicorn {args.workers} "
        f"workers x {args.threads} threads: {rate.group(1) if rate else '?'} req/s over "
        f"{total.group(1) if total else '?'} requests, p50 {p50.group(1) if p50 else '?'}, "
        f"p99 {p99.group(1) if p99 else '?'}, errors "
        f"{int(non_2xx.group(1)) if non_2xx else 0} non-2xx"
        f"{', socket ' + socket.group(1) if socket else ''}; gunicorn CPU "
        f"{cpu * 1000 / int(total.group(1)) if total else float('nan'):.2f} ms a request; "
        f"machine busy {busy:.1f} s and stolen {steal:.1f} s of "
        f"{(os.cpu_count() or 1) * args.seconds} core-seconds; "
        f"load average {' '.join(f'{n:.1f}' for n in os.getloadavg())}",
        flush=True,
    )
    pauses_report(args)
    errors = int(non_2xx.group(1)) if non_2xx else 0
    errors += sum(int(n) for n in re.findall(r"\d+", socket.group(1))) if socket else 0
    return (milliseconds(p99.group(1)) if p99 else float("nan")), errors


GC_PAUSE = re.compile(r"garbage collection of generation (\d) paused every thread for (\d+) ms")
SLOW = re.compile(r"GET /api/v1/nodes/ \d+ (\d+)ms")
REFRESHED = re.compile(r"node figures refreshed in (\S+) s \((in turn|at once)\)")


def pauses_report(args: argparse.Namespace) -> None:
    """What the web workers logged during the run: garbage collections that paused a worker
    (GC_PAUSE_LOG_SECONDS) and the requests slower than a second."""
    lines = args.log.read_text(errors="replace").splitlines()
    new, args.log_seen = lines[getattr(args, "log_seen", 0) :], len(lines)
    pauses = [(int(g), int(ms)) for line in new for g, ms in GC_PAUSE.findall(line)]
    slow = [int(ms) for line in new for ms in SLOW.findall(line) if int(ms) >= 1000]
    # The innermost portal frames of each slow request's stack, counted: where they waited.
    stacks: dict[str, int] = {}
    for block in "\n".join(new).split("still running after")[1:]:
        frames = re.findall(r'File "[^"]*/((?:pools|portal)/[^"]+)", line (\d+), in (\w+)', block)
        if frames:
            where = " < ".join(f"{f}:{n} {fn}" for f, n, fn in reversed(frames[-3:]))
            stacks[where] = stacks.get(where, 0) + 1
    worst = max((ms for _, ms in pauses), default=0)
    kinds = sorted({g for g, _ in pauses})
    print(
        f"  web workers: {len(pauses)} garbage collection pauses over 0.2 s"
        + (f" (generations {kinds}, longest {worst} ms)" if pauses else "")
        + f"; {len(slow)} requests over 1 s"
        + (f" (longest {max(slow)} ms)" if slow else ""),
        flush=True,
    )
    for where, count in sorted(stacks.items(), key=lambda item: -item[1])[:5]:
        print(f"    {count} slow request(s) were at: {where}", flush=True)
    # Each round of the figures' refresh: what METRICS_STALE_SECONDS must cover.
    rounds = [f"{s} s {how}" for line in new for s, how in REFRESHED.findall(line)]
    if rounds:
        print(f"    figures refreshed: {', '.join(rounds)}", flush=True)


def portal_env(
    kubeconfig: Path, prometheus: str, redis: Any, args: argparse.Namespace
) -> dict[str, str]:
    return {
        "METRICS_CACHE_SECONDS": str(args.cache_seconds),
        "METRICS_STALE_SECONDS": str(args.stale_seconds),
        "KUBECONFIG": str(kubeconfig),
        "PROMETHEUS_URL": prometheus,
        "PROMETHEUS_TIMEOUT": "10",
        "KUBE_TIMEOUT": "60",  # kubesim lists 5,000 nodes' pods slowly on a busy machine
        "API_TOKEN_RATE": "100000/min",
        "CACHE_URL": f"redis://127.0.0.1:{redis.port}/1",
        "CELERY_BROKER_URL": redis.url,
        # Where a request still running after a second waits (its stack, once).
        "SLOW_REQUEST_STACK_SECONDS": "1",
    }


def main() -> None:
    args = parse_args()
    # The load generator is a system package, installed like the project's other programs.
    subprocess.run([str(ROOT / "scripts" / "system-packages.sh"), "wrk"], check=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # Scraped once a minute: rendering 40,000 simulated GPUs is kubesim's work, not the
        # portal's, and would otherwise take the CPU the measurement is about.
        # The exporter exports the fields the portal reads (as a counters file would choose).
        with (
            kubesim_server(
                tmp / "sim",
                nodes=args.nodes,
                extra=["--exporter-counters", ",".join(PER_GPU_METRICS)],
                start_timeout=900,
            ) as sim,
            prometheus_server(
                tmp / "prom",
                scrape_targets=[sim.metrics_url.removeprefix("http://")],
                scrape_interval=f"{SCRAPE_SECONDS}s",
                scrape_timeout=f"{SCRAPE_SECONDS - 2}s",
                # --fed: the recorded series alone, as federated from the cluster's own
                # Prometheus (no rules here: they ran there).
                rules=not args.fed,
                metrics_path="/metrics/recorded" if args.fed else "/metrics",
            ) as prom,
            redis_server(tmp) as redis,
        ):
            wait_for(
                lambda: (
                    scalar(prom.url, "count(Hostname:DCGM_FI_DEV_GPU_UTIL:count)") == args.nodes
                ),
                timeout=600,
                what="the first full scrape and its recorded figures",
            )
            env = portal_env(sim.kubeconfig, prom.url, redis, args)
            django_env.setup(tmp, **env)
            tokens = portal_tokens(args.clients)
            port = free_port()
            args.log = tmp / "gunicorn.log"
            server = start_gunicorn(port, args, args.log)
            try:
                wait_for(
                    lambda: http_ok(f"http://127.0.0.1:{port}/healthz", timeout=30),
                    timeout=60,
                    what="gunicorn",
                )
                measure(f"http://127.0.0.1:{port}", tokens, args, server.pid, prom.url)
            finally:
                server.terminate()
                server.wait(timeout=30)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=40)
    # The chart's, the image's and compose's gunicorn: 3 workers of 4 threads.
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--profile", type=int, default=0, help="also profile this many requests in-process"
    )
    parser.add_argument(
        "--cache-seconds", type=int, default=10, help="METRICS_CACHE_SECONDS for the portal"
    )
    parser.add_argument(
        "--stale-seconds", type=int, default=10, help="METRICS_STALE_SECONDS for the portal"
    )
    parser.add_argument(
        "--fed",
        action="store_true",
        help="Prometheus holds the recorded series alone (kubesim's /metrics/recorded), as "
        "federation would bring them: the only way at 65,000 nodes on this machine",
    )
    parser.add_argument(
        "--no-metrics",
        action="store_true",
        help="no PROMETHEUS_URL: isolates the cost of the metric refreshes",
    )
    return parser.parse_args()


def portal_tokens(clients: int) -> list[str]:
    """The inventory synced, and an API token for each of `clients` viewers."""
    # Imported once django_env.setup has configured Django.
    from pools.inventory import inventory_sync
    from pools.tokens import token_create
    from tests.moves_helpers import user_in

    print(f"inventory: {inventory_sync()}", flush=True)
    return [
        token_create(user=user_in("viewers", f"client-{i}"), name="bench")[1]
        for i in range(clients)
    ]


def start_gunicorn(port: int, args: argparse.Namespace, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "portal.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(args.workers),
            "--threads",
            str(args.threads),
            "--worker-class",
            "gthread",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ},
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),  # a line a request
    )


def measure(
    base: str, tokens: list[str], args: argparse.Namespace, master: int, prometheus: str
) -> None:
    """Warm every worker, profile if asked, then the runs: wrk's, or Python threads' when
    wrk is missing."""
    warm = Http(base, tokens[0])
    for _ in range(args.workers * 3):  # every worker process fills its cache
        assert warm.request("GET", "/api/v1/nodes/")[0] == 200
    if args.profile:
        profile_requests(tokens[0], args.profile)
    if shutil.which("wrk"):
        workers = worker_pids(master)
        runs = [run_wrk(base, tokens, args, workers, prometheus) for _ in range(args.runs)]
        print(
            f"median p99 over {args.runs} runs: "
            f"{statistics.median(p99 for p99, _ in runs):.0f} ms, errors "
            f"{sum(errors for _, errors in runs)}",
            flush=True,
        )
        return
    print(
        "wrk is not installed (apt-get install wrk): measuring with Python "
        "threads, which share the two cores with the server",
        flush=True,
    )
    result = load(base, tokens, args.requests, lambda index, number: "/api/v1/nodes/")
    print(
        f"GET /api/v1/nodes/ at {args.nodes} nodes, {args.clients} token "
        f"clients x {args.requests} requests (Python threads): {result}",
        flush=True,
    )


if __name__ == "__main__":
    main()
