"""The real control plane's costs: its start (to /readyz, then to every scenario node Ready
with kubesim as kubelet) and the memory of each process once settled.

.venv/bin/python -m bench.control_plane [--runs 3] [--scenario demo | --nodes N]

Each run starts a new control plane in a temporary directory (the binaries from the cache:
`python -m controlplane build` first) and stops it. Times are medians over the runs;
memory is each process's resident set (VmRSS, and its peak VmHWM) once settled: a few
seconds after the nodes are Ready, or with `--until-pods-run` once every pod (the
scenario's and the GPU operator's DaemonSet pods) runs too. CPU is each process's over the
settling wait, so the heartbeats' steady cost shows.

Thousands of nodes (one Python process plays all their kubelets on the same cores as the
control plane) take the heartbeat and rate options below; with none of them each is
upstream's default, as for the demo:

    .venv/bin/python -m bench.control_plane --runs 1 --nodes 5000 --pods-per-node 1 \\
        --workers 8 --lease-renew-seconds 60 --lease-duration-seconds 240 \\
        --status-seconds 300 --node-monitor-grace-seconds 300 --kube-api-qps 100 \\
        --until-pods-run --settle-seconds 120
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config

from controlplane.launch import Options, running

TICKS = os.sysconf("SC_CLK_TCK")


def proc_status(pid: int, field: str) -> float:
    """A `kB` line of /proc/PID/status (VmRSS, VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def listed(lister: Any) -> list[dict[str, Any]]:
    """A list from the API server's watch cache (resourceVersion=0), as plain JSON: the
    client's models take seconds to build at thousands of nodes. A list cut off (tens of
    megabytes of pods from a starved API server can pass its 60 s request timeout) is
    asked again, up to three times."""
    for attempt in range(3):
        try:
            return json.loads(lister(resource_version="0", _preload_content=False).data)["items"]
        except urllib3.exceptions.ProtocolError:
            if attempt == 2:
                raise
            time.sleep(5)
    raise AssertionError("unreachable")


def is_ready(node: dict[str, Any]) -> bool:
    conditions = node["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def ready_nodes(api: client.ApiClient) -> int:
    return sum(1 for node in listed(client.CoreV1Api(api).list_node) if is_ready(node))


def pods_settled(api: client.ApiClient, nodes: int) -> tuple[bool, int]:
    """(whether every pod bound to a Ready node runs or is done and each DaemonSet has its
    pods ready on at least `nodes` nodes; the pods on Ready nodes). Pods a scenario keeps
    pending, and those of a node that never reports, are left out."""
    core = client.CoreV1Api(api)
    ready = {n["metadata"]["name"] for n in listed(core.list_node) if is_ready(n)}
    pods = [
        p
        for p in listed(core.list_pod_for_all_namespaces)
        if (p.get("spec") or {}).get("nodeName") in ready
    ]
    running = all((p.get("status") or {}).get("phase") in ("Running", "Succeeded") for p in pods)
    sets = listed(client.AppsV1Api(api).list_daemon_set_for_all_namespaces)
    daemons = bool(sets) and all(
        (s.get("status") or {}).get("desiredNumberScheduled", 0) >= nodes
        and (s.get("status") or {}).get("numberReady", 0) >= nodes
        for s in sets
    )
    return running and daemons, len(pods)


@dataclass
class Run:
    api_ready: float
    nodes_ready: float
    pods_running: float | None
    pods: int
    memory: dict[str, tuple[float, float]]  # process: (VmRSS, VmHWM) MiB
    cpu: dict[str, float]  # process: CPU seconds over the settling wait
    settle: float
    late_rounds: int  # heartbeat rounds the kubelet ran late


def one_run(options: list[str], wanted: int, plane_options: Options, args: Any) -> Run:
    poll = 0.5 if wanted < 1000 else 5.0
    with tempfile.TemporaryDirectory() as workdir:
        started = time.perf_counter()
        with running(Path(workdir) / "cp", options=plane_options) as plane:
            api_ready = time.perf_counter() - started
            print(f"  API server ready at {api_ready:.1f} s", flush=True)
            api = config.new_client_from_config(config_file=str(plane.kubeconfig), context="admin")
            argv = [sys.executable, "-m", "kubesim", "kubelet", "--kubeconfig"]
            argv += [str(plane.kubeconfig), "--context", "kubelet", "--metrics-port", "0"]
            log_path = Path(workdir) / "kubelet.log"
            with log_path.open("wb") as log:
                kubelet = subprocess.Popen([*argv, *options], stdout=log, stderr=subprocess.STDOUT)
            processes = {name: p.pid for name, p in plane.processes.items()}
            processes["kubesim kubelet"] = kubelet.pid
            try:
                while ready_nodes(api) < wanted:
                    if kubelet.poll() is not None:
                        raise RuntimeError(f"the kubelet exited: {log_path.read_text()[-2000:]}")
                    time.sleep(poll)
                nodes_ready = time.perf_counter() - started
                print(f"  {wanted} nodes Ready at {nodes_ready:.1f} s", flush=True)
                pods_at, pods = None, 0
                if args.until_pods_run:
                    while True:
                        settled, pods = pods_settled(api, wanted)
                        if settled and "nodes registered" in log_path.read_text():
                            break
                        if kubelet.poll() is not None:
                            raise RuntimeError(
                                f"the kubelet exited: {log_path.read_text()[-2000:]}"
                            )
                        time.sleep(poll)
                    pods_at = time.perf_counter() - started
                    print(f"  {pods} pods running at {pods_at:.1f} s", flush=True)
                before = {name: cpu_seconds(pid) for name, pid in processes.items()}
                settle_started = time.perf_counter()
                time.sleep(args.settle_seconds)
                settle = time.perf_counter() - settle_started
                cpu = {name: cpu_seconds(pid) - before[name] for name, pid in processes.items()}
                memory = {
                    name: (proc_status(pid, "VmRSS"), proc_status(pid, "VmHWM"))
                    for name, pid in processes.items()
                }
            finally:
                kubelet.terminate()
                kubelet.wait()
            late = log_path.read_text(errors="replace").count("heartbeats took")
    return Run(api_ready, nodes_ready, pods_at, pods, memory, cpu, settle, late)


def main() -> None:
    args = parse_args()
    options = ["--nodes", str(args.nodes)] if args.nodes else ["--scenario", args.scenario]
    for name in (
        "pods_per_node",
        "workers",
        "lease_renew_seconds",
        "lease_duration_seconds",
        "status_seconds",
    ):
        if getattr(args, name) is not None:
            options += [f"--{name.replace('_', '-')}", getattr(args, name)]
    plane_options = Options(
        node_monitor_grace_seconds=args.node_monitor_grace_seconds,
        kube_api_qps=args.kube_api_qps,
        start_timeout=300,
    )
    wanted = args.nodes or 24  # the demo's one silent node never becomes Ready
    print(f"{' '.join(options)}; {plane_options}; load average {os.getloadavg()[0]:.1f}")
    runs = [one_run(options, wanted, plane_options, args) for _ in range(args.runs)]
    report(runs)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenario", default="demo")
    parser.add_argument("--nodes", type=int, help="a generated cluster of N nodes instead")
    parser.add_argument("--settle-seconds", type=float, default=5)
    parser.add_argument(
        "--until-pods-run",
        action="store_true",
        help="settle once every pod runs (the scenario's and the DaemonSets'), not at Ready",
    )
    kubelet = parser.add_argument_group("the kubelet (kubesim kubelet's options)")
    for flag in (
        "--pods-per-node",
        "--workers",
        "--lease-renew-seconds",
        "--lease-duration-seconds",
        "--status-seconds",
    ):
        kubelet.add_argument(flag)
    plane = parser.add_argument_group("the controllers (controlplane.launch.Options)")
    plane.add_argument(
        "--node-monitor-grace-seconds", type=int, default=Options().node_monitor_grace_seconds
    )
    plane.add_argument("--kube-api-qps", type=int)
    return parser.parse_args()


def report(runs: list[Run]) -> None:
    """Start times, medians over the runs; memory and CPU, the last run's."""
    api = statistics.median(r.api_ready for r in runs)
    nodes = statistics.median(r.nodes_ready for r in runs)
    print(f"{len(runs)} runs")
    print(f"API server ready (etcd, kube-apiserver /readyz, scheduler, controllers): {api:.1f} s")
    print(f"every node Ready through kubesim's kubelets: {nodes:.1f} s (median)")
    last = runs[-1]
    if last.pods_running is not None:
        print(
            f"every pod running ({last.pods} pods, the DaemonSets' included): "
            f"{last.pods_running:.1f} s"
        )
    print(f"memory (VmRSS, peak VmHWM) and CPU over {last.settle:.0f} s settled:")
    for name, (rss, peak) in last.memory.items():
        share = last.cpu[name] / last.settle * 100
        print(f"  {name:<26} {rss:7.0f} MiB (peak {peak:6.0f} MiB)  CPU {share:5.1f} % of a core")
    total = sum(rss for rss, _ in last.memory.values())
    print(f"  {'total':<26} {total:7.0f} MiB")
    print(f"heartbeat rounds the kubelet ran late: {last.late_rounds}")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
